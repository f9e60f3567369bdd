package rdinit

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"
)

const testList = "/lib/modules/k/scsi_mod.ko\t\t\n" +
	"/lib/modules/k/crc64-rocksoft.ko\t\t\n" +
	"/lib/modules/k/t10-pi.ko\tcrc64_rocksoft\t\n" +
	"/lib/modules/k/sd_mod.ko\tscsi_mod,t10_pi\tscsi:t-0x00* scsi:t-0x0e*\n" +
	"/lib/modules/k/virtio_scsi.ko\tscsi_mod\tvirtio:d00000008v*\n" +
	"/lib/modules/k/virtio_pci.ko\t\tpci:v00001AF4d*sv*sd*bc*sc*i*\n" +
	"/lib/modules/k/mlxfw.ko\t\t\n" +
	"/lib/modules/k/mlx5_core.ko\tmlxfw\tpci:v000015B3d00001017sv*sd*bc*sc*i*\n" +
	"/lib/modules/k/crct10dif_generic.ko\t\tcrypto-crct10dif\n" +
	"/lib/modules/k/efivarfs.ko\t\tfs-efivarfs\n" +
	"/lib/modules/k/team.ko\t\t\tondemand\n" // loaded by name only

func names(es []modEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.name)
	}
	return out
}

func TestParseModuleList(t *testing.T) {
	es := parseModuleList(testList + "\n# comment\n/lib/modules/k/old-style.ko\n")
	if len(es) != 12 {
		t.Fatalf("%d entries: %v", len(es), names(es))
	}
	sd := es[3]
	if sd.name != "sd_mod" || !reflect.DeepEqual(sd.deps, []string{"scsi_mod", "t10_pi"}) ||
		!reflect.DeepEqual(sd.aliases, []string{"scsi:t-0x00*", "scsi:t-0x0e*"}) || !sd.deviceDriver() {
		t.Errorf("sd_mod: %+v", sd)
	}
	if es[11].name != "old_style" || es[11].deviceDriver() || es[8].deviceDriver() {
		t.Errorf("old-style line or name alias: %+v %+v", es[11], es[8])
	}
	if !es[10].onDemand || es[8].onDemand {
		t.Errorf("ondemand flag: %+v %+v", es[10], es[8])
	}
}

func TestModulesFor(t *testing.T) {
	es := parseModuleList(testList)
	devices := fstest.MapFS{
		"pci/devices/0000:00:04.0/modalias":     {Data: []byte("pci:v00001AF4d00001004sv00001AF4sd00000008bc01sc00i00\n")},
		"pci/devices/0000:00:05.0/vendor":       {Data: []byte("0x1af4\n")}, // a device without modalias
		"virtio/devices/virtio1/modalias":       {Data: []byte("virtio:d00000008v00001AF4\n")},
		"platform/devices/serial8250/modalias":  {Data: []byte("platform:serial8250\n")},
		"platform/devices/serial8251/modalias":  {Data: []byte("platform:serial8250\n")}, // same alias twice
		"cpu/devices/cpu0/modalias":             {Data: []byte("cpu:type:x86,ven0000fam0006mod003F:feature:,0000\n")},
		"nvme-subsystem/devices/nvme-subsys0/x": {Data: []byte("no devices dir of the usual shape")},
	}
	sc := newModaliasScanner(devices)
	first := sc.scan()
	if len(first) != 4 {
		t.Errorf("first scan: %q", first)
	}
	loaded := map[string]bool{}
	// Round 1: the PCI device and the virtio device are there; no disk yet.
	got := modulesFor(es, first, loaded)
	want := []string{"scsi_mod", "virtio_scsi", "virtio_pci", "crct10dif_generic", "efivarfs"}
	if !reflect.DeepEqual(names(got), want) {
		t.Errorf("round 1: %v, want %v", names(got), want)
	}
	for _, e := range got {
		loaded[e.name] = true
	}
	// Round 2: the HBA found a disk.
	devices["scsi/devices/0:0:3:0/modalias"] = &fstest.MapFile{Data: []byte("scsi:t-0x00\n")}
	second := sc.scan()
	if !reflect.DeepEqual(second, []string{"scsi:t-0x00"}) {
		t.Errorf("second scan (only what is new): %q", second)
	}
	got = modulesFor(es, second, loaded)
	if want := []string{"crc64_rocksoft", "t10_pi", "sd_mod"}; !reflect.DeepEqual(names(got), want) {
		t.Errorf("round 2: %v, want %v", names(got), want)
	}
	for _, e := range got {
		loaded[e.name] = true
	}
	if got := modulesFor(es, sc.scan(), loaded); len(got) != 0 {
		t.Errorf("round 3 should load nothing: %v", names(got))
	}
	// mlx5_core and its library never came: no such NIC.
	if loaded["mlx5_core"] || loaded["mlxfw"] {
		t.Error("loaded a driver for absent hardware")
	}
	if got := withDeps(es, []modEntry{es[7]}, loaded); !reflect.DeepEqual(names(got), []string{"mlxfw", "mlx5_core"}) {
		t.Errorf("withDeps(mlx5_core) = %v", names(got))
	}
}

// TestDevnameModuleLoadedByName: a file system whose aliases include the
// /dev node it makes (btrfs: devname:btrfs-control) is loaded by name at
// boot like the other file systems, not held back as a driver waiting
// for a device; a library with such an alias (dm-mod) still comes only
// with a module that needs it.
func TestDevnameModuleLoadedByName(t *testing.T) {
	es := parseModuleList("/lib/modules/k/kernel/lib/raid6/raid6_pq.ko.xz\t\t\n" +
		"/lib/modules/k/kernel/fs/btrfs/btrfs.ko.xz\traid6_pq\tdevname:btrfs-control char-major-10-234 fs-btrfs\n" +
		"/lib/modules/k/kernel/drivers/md/dm-mod.ko.xz\t\tdevname:mapper/control char-major-10-236\n" +
		"/lib/modules/k/kernel/drivers/md/dm-multipath.ko.xz\tdm-mod\t\n" +
		"/lib/modules/k/kernel/drivers/block/loop.ko.xz\t\tdevname:loop-control block-major-7-*\tondemand\n")
	for _, e := range es {
		if e.deviceDriver() {
			t.Errorf("%s counted as a device driver (aliases %q)", e.name, e.aliases)
		}
	}
	if got, want := names(modulesFor(es, nil, map[string]bool{})), []string{"raid6_pq", "btrfs", "dm_mod", "dm_multipath"}; !reflect.DeepEqual(got, want) {
		t.Errorf("loaded at boot: %v, want %v", got, want)
	}
}

// fakeKernel stands in for finit_module and sysfs in loader tests: a load
// takes a moment (probing), the devices a bus driver brings up appear when
// it has loaded, and a module whose dependency is not in yet fails as the
// kernel's "Unknown symbol" would.
type fakeKernel struct {
	mu       sync.Mutex
	byPath   map[string]modEntry
	loaded   map[string]bool
	order    []string
	inFlight int
	maxIn    int
	devices  []string
	brings   map[string][]string // module -> modaliases it brings up
	fail     map[string]bool
}

func (k *fakeKernel) load(path string) error {
	k.mu.Lock()
	e := k.byPath[path]
	for _, d := range e.deps {
		if !k.loaded[d] {
			k.mu.Unlock()
			return fmt.Errorf("%s: unknown symbol from %s", e.name, d)
		}
	}
	if k.loaded[e.name] {
		k.mu.Unlock()
		return fmt.Errorf("%s loaded twice", e.name)
	}
	k.inFlight++
	k.maxIn = max(k.maxIn, k.inFlight)
	k.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.inFlight--
	if k.fail[e.name] {
		return fmt.Errorf("finit_module %s: no such device", path)
	}
	k.loaded[e.name] = true
	k.order = append(k.order, e.name)
	k.devices = append(k.devices, k.brings[e.name]...)
	return nil
}

func (k *fakeKernel) scan() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.devices)
}

func newLoader(t *testing.T, list string, devices []string, brings map[string][]string) (*loader, *fakeKernel) {
	t.Helper()
	es := parseModuleList(list)
	k := &fakeKernel{byPath: map[string]modEntry{}, loaded: map[string]bool{}, devices: devices, brings: brings, fail: map[string]bool{}}
	l := &loader{entries: es, byName: map[string]modEntry{}, load: k.load, scan: k.scan, jobs: 8}
	for _, e := range es {
		k.byPath[e.path] = e
		l.byName[e.name] = e
	}
	return l, k
}

// TestLoaderParallel: drivers for devices present at once load together,
// every module after its dependencies, and the disks a bus driver brings
// up get their driver in a later scan.
func TestLoaderParallel(t *testing.T) {
	l, k := newLoader(t, testList+"/lib/modules/k/ahci.ko\t\tpci:v*d*sv*sd*bc01sc06i01*\n",
		[]string{"pci:v00001AF4d00001004sv00001AF4sd00000008bc01sc00i00", "pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01"},
		map[string][]string{
			"virtio_pci":  {"virtio:d00000008v00001AF4"},
			"virtio_scsi": {"scsi:t-0x00"},
			"ahci":        {"scsi:t-0x00"},
		})
	st := l.run(nil, true)
	if len(st.errs) != 0 {
		t.Fatalf("errors: %v", st.errs)
	}
	want := []string{"ahci", "crc64_rocksoft", "crct10dif_generic", "efivarfs", "scsi_mod", "sd_mod", "t10_pi", "virtio_pci", "virtio_scsi"}
	got := slices.Sorted(maps.Keys(k.loaded))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded %v, want %v", got, want)
	}
	if st.loaded != len(want) {
		t.Errorf("loaded count %d, want %d", st.loaded, len(want))
	}
	if k.maxIn < 3 || st.maxParallel < 3 {
		t.Errorf("at most %d loads at once (loader says %d): not parallel", k.maxIn, st.maxParallel)
	}
	pos := map[string]int{}
	for i, n := range k.order {
		pos[n] = i
	}
	for _, e := range l.entries {
		for _, d := range e.deps {
			if _, ok := pos[e.name]; ok && pos[d] > pos[e.name] {
				t.Errorf("%s loaded before its dependency %s: %v", e.name, d, k.order)
			}
		}
	}
	if st.scans < 2 || len(st.slowest) != 5 {
		t.Errorf("scans %d, slowest %v", st.scans, st.slowest)
	}
}

// TestLoaderAllAndFailures: without coldplug every module loads; a failed
// load is reported and does not stop the others, nor wedge what depends
// on it.
// TestLoaderLateDevices: a second run, for devices that came after the
// first one's scans (USB disks after usb_storage's delay_use), loads
// their drivers and nothing twice.
func TestLoaderLateDevices(t *testing.T) {
	l, k := newLoader(t, testList, []string{"pci:v00001AF4d00001004sv00001AF4sd00000008bc01sc00i00"},
		map[string][]string{"virtio_pci": {"virtio:d00000008v00001AF4"}})
	if st := l.run(nil, true); len(st.errs) != 0 || !k.loaded["virtio_scsi"] || k.loaded["sd_mod"] {
		t.Fatalf("first run: loaded %v, errors %v", k.order, st.errs)
	}
	k.mu.Lock()
	k.devices = append(k.devices, "scsi:t-0x00")
	k.mu.Unlock()
	st := l.run(nil, true)
	if len(st.errs) != 0 || !k.loaded["sd_mod"] || !k.loaded["t10_pi"] {
		t.Errorf("second run: loaded %v, errors %v", k.order, st.errs)
	}
}

func TestLoaderAllAndFailures(t *testing.T) {
	l, k := newLoader(t, testList, nil, nil)
	k.fail["mlxfw"] = true
	st := l.run(nil, false)
	if k.loaded["mlxfw"] || k.loaded["mlx5_core"] {
		t.Error("mlx5_core loaded without mlxfw")
	}
	// "all" loads the on-demand modules too (team).
	if len(st.errs) != 2 || st.loaded != 9 {
		t.Errorf("loaded %d, errors %v", st.loaded, st.errs)
	}
	// Forced modules on top of coldplug, with their dependencies.
	l, k = newLoader(t, testList, nil, nil)
	st = l.run([]modEntry{l.byName["sd_mod"]}, true)
	if !k.loaded["sd_mod"] || !k.loaded["t10_pi"] || k.loaded["virtio_scsi"] || len(st.errs) != 0 {
		t.Errorf("forced sd_mod: loaded %v, errors %v", k.order, st.errs)
	}
}

func TestLoadModule(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "modules")
	sys := filepath.Join(dir, "sys-module")
	os.MkdirAll(sys, 0o755)
	os.WriteFile(list, []byte(testList+"/lib/modules/k/llc.ko\t\t\n/lib/modules/k/stp.ko\tllc\t\n"+
		"/lib/modules/k/garp.ko\tstp,llc\t\n/lib/modules/k/mrp.ko\t\t\n/lib/modules/k/8021q.ko\tgarp,mrp\trtnl-link-vlan\n"), 0o644)
	var mu sync.Mutex
	var loaded []string
	load := func(p string) error {
		mu.Lock()
		defer mu.Unlock()
		loaded = append(loaded, filepath.Base(p))
		return nil
	}
	if err := loadModule(list, sys, "8021q", load, nil); err != nil {
		t.Fatal(err)
	}
	// Its dependencies first, and nothing else of the list.
	if want := []string{"llc.ko", "stp.ko", "garp.ko", "mrp.ko", "8021q.ko"}; !slices.Equal(loaded, want) {
		t.Errorf("loaded %v, want %v", loaded, want)
	}
	// In the kernel already (loaded or built in): nothing to do.
	loaded = nil
	os.MkdirAll(filepath.Join(sys, "8021q"), 0o755)
	if err := loadModule(list, sys, "8021q", load, nil); err != nil || loaded != nil {
		t.Errorf("built in: loaded %v, %v", loaded, err)
	}
	err := loadModule(list, sys, "bonding", load, nil)
	if err == nil || !strings.Contains(err.Error(), "bonding") || !strings.Contains(err.Error(), list) {
		t.Errorf("not in the list: %v", err)
	}
	fail := func(p string) error { return fmt.Errorf("finit_module %s: no", p) }
	if err := loadModule(list, t.TempDir(), "8021q", fail, nil); err == nil || !strings.Contains(err.Error(), "8021q.ko") {
		t.Errorf("failed load: %v", err)
	}
}

func TestModuleFileNames(t *testing.T) {
	for p, want := range map[string]struct {
		name       string
		compressed bool
	}{
		"/lib/modules/v/kernel/drivers/scsi/hv_storvsc.ko":     {"hv_storvsc", false},
		"/lib/modules/v/kernel/drivers/net/xen-netfront.ko.xz": {"xen_netfront", true},
		"/lib/modules/v/kernel/fs/btrfs/btrfs.ko.zst":          {"btrfs", true},
		"/lib/modules/v/kernel/lib/libcrc32c.ko.gz":            {"libcrc32c", true},
	} {
		if n, c := moduleName(p), compressedModule(p); n != want.name || c != want.compressed {
			t.Errorf("%s: %s %v, want %s %v", p, n, c, want.name, want.compressed)
		}
	}
	if e := parseModuleList("/lib/modules/v/a-b.ko.xz\tdep\tpci:v*\n"); len(e) != 1 || e[0].name != "a_b" {
		t.Errorf("list entry: %+v", e)
	}
}

// A bus driver that returns ENODEV outside its hypervisor (hv_vmbus)
// leaves nothing in the kernel: its dependents are passed over, not
// loaded and failed with unknown symbols.
func TestLoaderPassesOverDependentsOfAbsentBus(t *testing.T) {
	es := parseModuleList("/m/hv_vmbus.ko\t\tacpi*:VMBUS:*\n/m/hv_netvsc.ko\thv_vmbus\tvmbus:*\n/m/hv_utils.ko\thv_vmbus\tvmbus:*\n/m/e1000.ko\t\tpci:*\n")
	var loaded []string
	l := &loader{entries: es, byName: map[string]modEntry{}, jobs: 1,
		load:    func(p string) error { loaded = append(loaded, p); return nil },
		present: func(name string) bool { return name != "hv_vmbus" }}
	for _, e := range es {
		l.byName[e.name] = e
	}
	st := l.run(nil, false)
	if len(st.errs) != 0 || st.loaded != 4 {
		t.Errorf("errors %v, loaded %d", st.errs, st.loaded)
	}
	if want := []string{"/m/hv_vmbus.ko", "/m/e1000.ko"}; !slices.Equal(loaded, want) {
		t.Errorf("loaded %v, want %v", loaded, want)
	}
}

// TestWithOverlayLists: an overlay's module list adds its modules after
// the ramdisk's and replaces one of the same name in place.
func TestWithOverlayLists(t *testing.T) {
	base := parseModuleList("/lib/modules/k/a.ko\t\tpci:v1*\n/lib/modules/k/b.ko\ta\tpci:v2*\n")
	fsys := fstest.MapFS{
		"modules.d/10-site.list": {Data: []byte("/lib/modules/k/updates/b.ko\ta\tpci:v3*\n/lib/modules/k/updates/c.ko\tb\t\n")},
		"modules.d/notes.txt":    {Data: []byte("not a list")},
	}
	got, lists, errs := withOverlayLists(base, fsys, "modules.d")
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if strings.Join(lists, " ") != "modules.d/10-site.list" {
		t.Errorf("lists %v", lists)
	}
	var paths []string
	for _, e := range got {
		paths = append(paths, e.path)
	}
	if strings.Join(paths, " ") != "/lib/modules/k/a.ko /lib/modules/k/updates/b.ko /lib/modules/k/updates/c.ko" {
		t.Errorf("entries %v", paths)
	}
	if got, _, _ := withOverlayLists(base, fstest.MapFS{}, "modules.d"); len(got) != 2 {
		t.Errorf("no overlay: %v", got)
	}
}
