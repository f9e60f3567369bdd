package rdinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// modEntry is one line of the initramfs's module list.
type modEntry struct {
	name    string
	path    string
	deps    []string
	aliases []string
	// onDemand: never loaded at boot, only by name when needed (8021q
	// for a VLAN; bonding, which makes a bond0 when loaded).
	onDemand bool
}

// parseModuleList reads the module list written by internal/ramdisk:
// "path<TAB>dep,dep<TAB>alias alias[<TAB>ondemand]" per line (older lists have the path
// only). Lines are in dependency order.
func parseModuleList(data string) []modEntry {
	var out []modEntry
	for line := range strings.SplitSeq(data, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		e := modEntry{path: strings.TrimSpace(f[0])}
		if e.path == "" {
			continue
		}
		e.name = moduleName(e.path)
		if len(f) > 1 {
			for d := range strings.SplitSeq(f[1], ",") {
				if d = strings.TrimSpace(d); d != "" {
					e.deps = append(e.deps, d)
				}
			}
		}
		if len(f) > 2 {
			e.aliases = strings.Fields(f[2])
		}
		if len(f) > 3 {
			e.onDemand = strings.TrimSpace(f[3]) == "ondemand"
		}
		out = append(out, e)
	}
	return out
}

// withOverlayLists adds the entries of every *.list file in dir of fsys
// (the module lists of overlay archives, internal/ramdisk/overlay), in
// name order: a module of the name of one of base's replaces it in
// place (an updated driver), another is added at the end. It returns the
// lists found; a list that cannot be read is an error, the others still
// apply.
func withOverlayLists(base []modEntry, fsys fs.FS, dir string) ([]modEntry, []string, []error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.list"))
	if err != nil || len(names) == 0 {
		return base, nil, nil
	}
	sort.Strings(names)
	out := append([]modEntry(nil), base...)
	at := map[string]int{}
	for i, e := range out {
		at[e.name] = i
	}
	var errs []error
	for _, n := range names {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			errs = append(errs, fmt.Errorf("overlay module list: %w", err))
			continue
		}
		for _, e := range parseModuleList(string(data)) {
			if i, ok := at[e.name]; ok {
				out[i] = e
				continue
			}
			at[e.name] = len(out)
			out = append(out, e)
		}
	}
	return out, names, errs
}

// moduleSuffixes are the module file names the list may hold: plain, and
// compressed for the kernel to decompress (compressedModule).
var moduleSuffixes = [...]string{".ko.xz", ".ko.zst", ".ko.gz", ".ko"}

// moduleName is the kernel's name of the module file at p.
func moduleName(p string) string {
	base := path.Base(p)
	for _, s := range moduleSuffixes {
		if b, ok := strings.CutSuffix(base, s); ok {
			base = b
			break
		}
	}
	return strings.ReplaceAll(base, "-", "_")
}

// compressedModule says whether the module file at p is compressed
// (.ko.xz, .ko.zst, .ko.gz): finit_module then needs
// MODULE_INIT_COMPRESSED_FILE.
func compressedModule(p string) bool {
	for _, s := range moduleSuffixes[:3] {
		if strings.HasSuffix(p, s) {
			return true
		}
	}
	return false
}

// deviceDriver reports whether the module is a driver the kernel would
// load for a device (an alias with a bus prefix: "pci:", "virtio:",
// "acpi*:"), as opposed to a library or file system loaded by name. A
// "devname:" alias is not a bus: it names the /dev node the module makes
// (btrfs's devname:btrfs-control, dm-mod's devname:mapper/control), which
// no device's modalias ever matches.
func (e modEntry) deviceDriver() bool {
	for _, a := range e.aliases {
		if strings.Contains(a, ":") && !strings.HasPrefix(a, "devname:") {
			return true
		}
	}
	return false
}

// matches reports whether one of the module's alias patterns matches one
// of the devices' modaliases (the shell-glob matching modprobe does).
func (e modEntry) matches(modaliases []string) bool {
	for _, a := range e.aliases {
		if !strings.Contains(a, ":") {
			continue
		}
		for _, m := range modaliases {
			if ok, err := path.Match(a, m); err == nil && ok {
				return true
			}
		}
	}
	return false
}

// modaliasScanner finds the modalias of every device on a bus
// (/sys/bus/<bus>/devices/<device>/modalias), what udev hands to modprobe
// at coldplug. Each scan reads only the devices it has not seen before and
// returns the modaliases that are new: walking all of /sys/devices (every
// attribute of every device) took about a second per scan under
// emulation, and the loader scans after every driver.
type modaliasScanner struct {
	fsys    fs.FS // rooted at /sys/bus
	devices map[string]bool
	seen    map[string]bool
}

func newModaliasScanner(fsys fs.FS) *modaliasScanner {
	return &modaliasScanner{fsys: fsys, devices: map[string]bool{}, seen: map[string]bool{}}
}

func (s *modaliasScanner) scan() []string {
	var out []string
	buses, _ := fs.ReadDir(s.fsys, ".")
	for _, b := range buses {
		devs, _ := fs.ReadDir(s.fsys, path.Join(b.Name(), "devices"))
		for _, d := range devs {
			p := path.Join(b.Name(), "devices", d.Name())
			if s.devices[p] {
				continue
			}
			s.devices[p] = true
			data, err := fs.ReadFile(s.fsys, path.Join(p, "modalias"))
			if err != nil {
				continue // no modalias (not every bus has them), or gone
			}
			m := strings.TrimSpace(string(data))
			if m != "" && !s.seen[m] {
				s.seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// withDeps returns want, each after its dependencies, leaving out what is
// loaded.
func withDeps(entries, want []modEntry, loaded map[string]bool) []modEntry {
	byName := map[string]modEntry{}
	for _, e := range entries {
		byName[e.name] = e
	}
	var out []modEntry
	queued := map[string]bool{}
	var add func(e modEntry)
	add = func(e modEntry) {
		if loaded[e.name] || queued[e.name] {
			return
		}
		queued[e.name] = true
		for _, d := range e.deps {
			if de, ok := byName[d]; ok {
				add(de)
			}
		}
		out = append(out, e)
	}
	for _, e := range want {
		add(e)
	}
	return out
}

// modulesFor picks the modules to load given the devices present (or
// those that are new since the last call: a driver matching an older one
// is loaded already): every
// module that is not a device driver and that no other module needs (the
// file systems and helpers asked for by name: efivarfs, ipmi_devintf, the
// CRC modules t10-pi requests at run time), and every driver one of whose
// aliases matches a device, each after its dependencies. Libraries come
// only with a module that needs them. loaded names modules already in.
func modulesFor(entries []modEntry, modaliases []string, loaded map[string]bool) []modEntry {
	needed := map[string]bool{}
	for _, e := range entries {
		for _, d := range e.deps {
			needed[d] = true
		}
	}
	var want []modEntry
	for _, e := range entries {
		if loaded[e.name] {
			continue // matching thousands of PCI IDs again is not free
		}
		if e.onDemand {
			continue
		}
		if e.deviceDriver() && e.matches(modaliases) || !e.deviceDriver() && !needed[e.name] {
			want = append(want, e)
		}
	}
	return withDeps(entries, want, loaded)
}

// loader schedules module loads; load and scan are finit_module and the
// sysfs modalias scan, replaced in tests.
type loader struct {
	entries []modEntry
	byName  map[string]modEntry
	load    func(path string) error
	scan    func() []string
	// jobs is how many loads may run at once (at least 1).
	jobs int
	// onPanic receives a panic of a load goroutine (see Recover).
	onPanic func(error)
	// present says whether a module is in the kernel (/sys/module/NAME);
	// nil skips the check. A load that returned ENODEV (a Hyper-V or Xen
	// bus outside its hypervisor) leaves nothing there, and its
	// dependents cannot link: they are passed over as it was.
	present func(name string) bool
	// started and done last from one run to the next: a later run (for
	// devices that came late) loads only what is new.
	started, done map[string]bool
}

// loadStats is what a loader run did.
type loadStats struct {
	loaded      int
	slowest     []moduleTime // the five slowest loads
	maxParallel int
	scans       int
	scanTime    time.Duration
	errs        []error
	// overlays are the overlays' module lists read (withOverlayLists).
	overlays []string
}

// run loads forced (with dependencies) and, with coldplug, what the
// devices call for, else every module of the list; it returns when
// nothing is loading and a rescan finds nothing new.
func (l *loader) run(forced []modEntry, coldplug bool) loadStats {
	var st loadStats
	if l.started == nil {
		l.started, l.done = map[string]bool{}, map[string]bool{}
	}
	started := l.started   // queued, loading or finished
	done := l.done         // finished, loaded or not
	var pending []modEntry // queued, waiting for dependencies
	type result struct {
		e    modEntry
		took time.Duration
		err  error
	}
	results := make(chan result)
	running := 0
	var times []moduleTime
	queue := func(want []modEntry) {
		for _, e := range want {
			if !started[e.name] {
				started[e.name] = true
				pending = append(pending, e)
			}
		}
	}
	ready := func(e modEntry) bool {
		for _, d := range e.deps {
			if _, inList := l.byName[d]; inList && !done[d] {
				return false
			}
		}
		return true
	}
	start := func(e modEntry) {
		if l.present != nil {
			for _, d := range e.deps {
				if _, inList := l.byName[d]; inList && done[d] && !l.present(d) {
					done[e.name] = true
					st.loaded++ // as its dependency: nothing to drive here
					return
				}
			}
		}
		running++
		st.maxParallel = max(st.maxParallel, running)
		go func() {
			defer Recover(l.onPanic)
			t := time.Now()
			err := l.load(e.path)
			results <- result{e, time.Since(t), err}
		}()
	}
	jobs := max(1, l.jobs)
	startReady := func() {
		// Again while a pass passes a module over: that may ready others.
		for again := true; again; {
			again = false
			var waiting []modEntry
			for _, e := range pending {
				if running < jobs && ready(e) {
					n := running
					start(e)
					again = again || running == n
				} else {
					waiting = append(waiting, e)
				}
			}
			pending = waiting
		}
		for running == 0 && len(pending) > 0 {
			// A dependency that can never finish first (a soft-dependency
			// cycle): load it anyway; the kernel says what is missing.
			e := pending[0]
			pending = pending[1:]
			start(e)
		}
	}
	scan := func() {
		t := time.Now()
		queue(modulesFor(l.entries, l.scan(), started))
		st.scans++
		st.scanTime += time.Since(t)
	}
	finish := func(r result) bool {
		running--
		done[r.e.name] = true
		if r.err != nil {
			st.errs = append(st.errs, r.err)
		} else {
			st.loaded++
			times = append(times, moduleTime{r.e.name, r.took})
		}
		return r.e.deviceDriver()
	}
	if coldplug {
		scan()
	} else {
		queue(l.entries)
	}
	queue(withDeps(l.entries, forced, started))
	startReady()
	for running > 0 {
		rescan := finish(<-results)
		// Take whatever else finished meanwhile: one scan for them all.
		for more := true; more; {
			select {
			case r := <-results:
				rescan = finish(r) || rescan
			default:
				more = false
			}
		}
		// One at a time, a scan after each driver would mostly find
		// nothing: scan when the queue has run dry (rounds, as before).
		if coldplug && (rescan && jobs > 1 || running == 0 && len(pending) == 0) {
			scan()
		}
		startReady()
	}
	sort.Slice(times, func(i, j int) bool { return times[i].took > times[j].took })
	st.slowest = times[:min(5, len(times))]
	return st
}

// moduleTime is how long one module took to load (and probe its devices).
type moduleTime struct {
	name string
	took time.Duration
}

// loadModule is modprobe of one module: by the init's code (8021q for
// VLANs, usb_storage for virtual media) or for the kernel and programs
// (Modprobe). name is a module's name or an alias (modulesForRequest);
// nothing is done when sysModule (/sys/module) shows it in the kernel
// already, loaded or built in (a built-in module with a version or
// parameters, as 8021q has, gets a directory there too). Else the modules
// it names and their dependencies not in the kernel yet are loaded from
// the list and the overlays' lists beside it, one at a time, with load.
// errNoModule says that no module of the lists answers name.
func loadModule(list, sysModule, name string, load func(path string) error, onPanic func(error)) error {
	if _, err := os.Stat(filepath.Join(sysModule, strings.ReplaceAll(name, "-", "_"))); err == nil {
		return nil
	}
	data, err := os.ReadFile(list)
	if err != nil {
		return fmt.Errorf("module %s: not in the kernel, and the module list: %w", name, err)
	}
	entries, _, errs := withOverlayLists(parseModuleList(string(data)), os.DirFS(filepath.Dir(list)), "modules.d")
	want := modulesForRequest(entries, name)
	if len(want) == 0 {
		return fmt.Errorf("module %s: %w %s", name, errNoModule, list)
	}
	l := &loader{load: load, jobs: 1, onPanic: onPanic, byName: map[string]modEntry{}}
	for _, e := range withDeps(entries, want, nil) {
		if _, err := os.Stat(filepath.Join(sysModule, e.name)); err == nil {
			continue // in the kernel already
		}
		l.entries = append(l.entries, e)
		l.byName[e.name] = e
	}
	return errors.Join(append(errs, l.run(nil, false).errs...)...)
}

// errNoModule: no module of the lists has the name or alias asked for.
var errNoModule = errors.New("not in the kernel and not in the initramfs's module lists")
