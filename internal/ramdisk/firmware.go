package ramdisk

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/debian"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/initramfs"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
)

// FirmwarePackage is an extracted Debian firmware package.
type FirmwarePackage struct {
	Name    string // e.g. firmware-bnx2
	Version string // the Debian version taken
	Source  string // its source package
	URL     string // where the .deb was fetched from
	Deb     string // the .deb it came from
	SHA256  string // of Deb: the cache key's part for it
	Dir     string // the extracted tree
}

// File returns the host path of firmware file name as the package ships
// it (a Report's FirmwareFile.Name: the name, or the name.xz), the
// package's own symbolic links followed.
func (p FirmwarePackage) File(name string) (string, bool) {
	host, archived, ok := p.lookup(name)
	return host, ok && archived == name
}

// lookup returns the host path of firmware name in the package, and the
// name it has there: as named, or compressed with XZ (Debian's kernel
// loads .xz firmware itself: CONFIG_FW_LOADER_COMPRESS_XZ=y; later
// Debian releases ship firmware that way).
func (p FirmwarePackage) lookup(name string) (host, archived string, ok bool) {
	for _, root := range []string{"lib/firmware", "usr/lib/firmware"} {
		for _, n := range []string{name, name + ".xz"} {
			// The package's own symlinks (one file under two names) are
			// followed, but only within the package: an absolute one would
			// point at the build host's /lib/firmware.
			h, err := filepath.EvalSymlinks(filepath.Join(p.Dir, root, n))
			if err != nil || !strings.HasPrefix(h, p.Dir+string(filepath.Separator)) {
				continue
			}
			if st, err := os.Stat(h); err == nil && st.Mode().IsRegular() {
				return h, n, true
			}
		}
	}
	return "", "", false
}

// firmwareDebianComponents are the archive components firmware comes from.
const firmwareDebianComponents = "main non-free-firmware"

// FetchFirmware downloads the Debian packages pkgs (see FirmwarePackages)
// of kernel flavour f's suites (the highest version across them, from
// f's mirrors with the Debian archive client, verified against the
// archive's signature) and extracts each into
// cacheDir/firmware/<flavour>/pkg/<sha256 of the .deb>, so a new package
// version is a new directory and never mixed with an older one. The
// firmware comes from the kernel's own release: its drivers ask for the
// file names that release ships.
//
// A package marked optional that the flavour's suites lack (a package
// one release split off another: firmware-intel-misc from
// firmware-misc-nonfree in Debian 13) is left out; a required one that is
// missing fails, naming the suites searched.
func FetchFirmware(ctx context.Context, cacheDir string, f KernelFlavour, pkgs []ManifestEntry) ([]FirmwarePackage, error) {
	c, ix, err := flavourIndex(ctx, cacheDir, f)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range pkgs {
		if _, ok := ix.Lookup(p.Name); !ok && p.Optional {
			continue
		}
		names = append(names, p.Name)
	}
	return fetchPackages(ctx, c, ix, filepath.Join(cacheDir, "firmware", f.Name), names)
}

// FirmwareIndex returns which Debian packages ship each firmware file
// (name below /lib/firmware -> packages): the non-free-firmware
// component's Contents-all of kernel flavour f's suites (verified
// against their InRelease like every index), plus the files of pkgs.
// main's Contents (34 MiB) is not fetched: the only package in main that
// ships kernel firmware is firmware-linux-free, which
// firmware-packages.txt lists.
//
// The index only checks that firmware-packages.txt forgets no package;
// what goes into the initramfs comes from pkgs, each verified. So a suite
// whose Contents the mirror serves out of sync with its InRelease (a
// mirror caught between two publications) is left out when another of
// f's suites gives a verified one: unverified says which and why, for
// the build's report. With none verified the build fails.
func FirmwareIndex(ctx context.Context, cacheDir string, f KernelFlavour, pkgs []FirmwarePackage) (idx map[string][]string, unverified []string, err error) {
	c, err := archiveClient(cacheDir, f.Arch, f.Mirrors)
	if err != nil {
		return nil, nil, err
	}
	idx, unverified, err = firmwareIndex(f.Suites, func(suite string) ([]io.ReadCloser, error) {
		return c.Contents(ctx, []string{suite}, "non-free-firmware", "all")
	}, pkgs)
	if err != nil {
		return nil, nil, fmt.Errorf("ramdisk: firmware: kernel flavour %s: %w", f.Name, err)
	}
	return idx, unverified, nil
}

// firmwareIndex is FirmwareIndex over contents, which returns the
// verified non-free-firmware Contents-all of a suite.
func firmwareIndex(suites []string, contents func(suite string) ([]io.ReadCloser, error), pkgs []FirmwarePackage) (idx map[string][]string, unverified []string, err error) {
	var readers []io.ReadCloser
	defer func() {
		for _, r := range readers {
			r.Close()
		}
	}()
	var firstDigestErr error
	for _, suite := range suites {
		rs, err := contents(suite)
		var de *debian.DigestError
		switch {
		case err == nil:
			readers = append(readers, rs...)
		case errors.Is(err, debian.ErrNoContents):
		case errors.As(err, &de):
			if firstDigestErr == nil {
				firstDigestErr = err
			}
			unverified = append(unverified, fmt.Sprintf("suite %s: %v", suite, err))
		default:
			return nil, nil, err
		}
	}
	switch {
	case len(readers) == 0 && firstDigestErr != nil:
		return nil, nil, firstDigestErr
	case len(readers) == 0:
		return nil, nil, fmt.Errorf("no suite of %s publishes non-free-firmware/Contents-all", strings.Join(suites, ", "))
	}
	idx = map[string][]string{}
	add := func(name, pkg string) {
		if !slices.Contains(idx[name], pkg) {
			idx[name] = append(idx[name], pkg)
		}
	}
	for _, r := range readers {
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the Contents-all index: %w", err)
		}
		for name, pkgs := range parseContents(string(b)) {
			for _, p := range pkgs {
				add(name, p)
			}
		}
	}
	for _, p := range pkgs {
		for _, root := range []string{"lib/firmware", "usr/lib/firmware"} {
			dir := filepath.Join(p.Dir, root)
			_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if rel, err := filepath.Rel(dir, path); err == nil {
						add(filepath.ToSlash(rel), p.Name)
					}
				}
				return nil
			})
		}
	}
	return idx, unverified, nil
}

// parseContents reads a Contents file: "PATH SECTION/PACKAGE[,...]" lines
// (the path may hold spaces, the last field never does). It returns the
// files below lib/firmware or usr/lib/firmware, relative to it, with
// their packages.
func parseContents(text string) map[string][]string {
	out := map[string][]string{}
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		i := strings.LastIndexAny(line, " \t")
		if i < 0 {
			continue
		}
		p, locs := strings.TrimSpace(line[:i]), line[i+1:]
		name, ok := strings.CutPrefix(p, "lib/firmware/")
		if !ok {
			if name, ok = strings.CutPrefix(p, "usr/lib/firmware/"); !ok {
				continue
			}
		}
		if name == "" {
			continue
		}
		for l := range strings.SplitSeq(locs, ",") {
			if l != "" {
				out[name] = append(out[name], path.Base(l))
			}
		}
	}
	return out
}

// HostDebianSources returns the build host's Debian archives (read
// only, for ResolveMirrors' default mirrors) as the start of one-line
// sources.list entries, "deb [signed-by=KEYRING] URI SUITE",
// from etc/sources.list, etc/sources.list.d/*.list and *.sources (deb822):
// every "deb" source with the main component, whose mirror and suites are
// then used for other components of the same archive.
func HostDebianSources(etc string) ([]string, error) {
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	lists, _ := filepath.Glob(filepath.Join(etc, "sources.list.d", "*.list"))
	for _, p := range append([]string{filepath.Join(etc, "sources.list")}, lists...) {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, s := range parseOneLineSources(string(b)) {
			add(s)
		}
	}
	debs, _ := filepath.Glob(filepath.Join(etc, "sources.list.d", "*.sources"))
	for _, p := range debs {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("ramdisk: firmware: %w", err)
		}
		for _, s := range parseDeb822Sources(string(b)) {
			add(s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ramdisk: firmware: no Debian \"deb\" source with component main in %s/sources.list or %s/sources.list.d", etc, etc)
	}
	return out, nil
}

// parseOneLineSources reads "deb [options] URI SUITE COMPONENT..." lines.
func parseOneLineSources(text string) []string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "deb" {
			continue
		}
		opts := ""
		if strings.HasPrefix(f[1], "[") {
			// Options may hold spaces: up to the closing bracket.
			i := 1
			for ; i < len(f) && !strings.HasSuffix(f[i], "]"); i++ {
			}
			if i+3 > len(f) {
				continue
			}
			opts = strings.Join(f[1:i+1], " ") + " "
			f = append([]string{"deb"}, f[i+1:]...)
		}
		if slices.Contains(f[3:], "main") {
			out = append(out, "deb "+opts+f[1]+" "+f[2])
		}
	}
	return out
}

// parseDeb822Sources reads a .sources file: stanzas of "Key: value"
// fields separated by blank lines (Types, URIs, Suites, Components,
// Signed-By, Enabled).
func parseDeb822Sources(text string) []string {
	var out []string
	flush := func(st map[string]string) {
		if !slices.Contains(strings.Fields(st["types"]), "deb") || strings.EqualFold(st["enabled"], "no") ||
			!slices.Contains(strings.Fields(st["components"]), "main") {
			return
		}
		opts := ""
		if k := strings.TrimSpace(st["signed-by"]); k != "" && !strings.Contains(k, "\n") && !strings.Contains(k, " ") {
			opts = "[signed-by=" + k + "] "
		}
		for _, u := range strings.Fields(st["uris"]) {
			for _, s := range strings.Fields(st["suites"]) {
				out = append(out, "deb "+opts+u+" "+s)
			}
		}
	}
	st := map[string]string{}
	last := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush(st)
			st, last = map[string]string{}, ""
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				st[last] += "\n" + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			st[last] = strings.TrimSpace(v)
		}
	}
	flush(st)
	return out
}

// addFirmware writes, below lib/firmware, every file a module of mods
// names that one of pkgs ships (the first that has it), as one piece per
// package, and records in rep what went in and what no package had. It
// fails when index (FirmwareIndex; nil for none) says a Debian package
// not among pkgs ships a file, and when a file it found did not go in.
func addFirmware(w *initramfs.Writer, piece func(string, int, func() error) error, mods []kmod.Module, pkgs []FirmwarePackage, index map[string][]string, rep *Report) error {
	type file struct{ host, name string }
	var unlisted []string
	perPkg := map[string][]file{}
	seen := map[string]bool{}
	for _, m := range mods {
		for _, name := range m.Firmware {
			if seen[name] {
				continue
			}
			seen[name] = true
			// A name that climbs out of /lib/firmware is not one.
			if !filepath.IsLocal(name) {
				rep.FirmwareMissing = append(rep.FirmwareMissing, FirmwareRef{Module: m.Name, Name: name})
				continue
			}
			found := false
			for _, p := range pkgs {
				if host, archived, ok := p.lookup(name); ok {
					perPkg[p.Name] = append(perPkg[p.Name], file{host, archived})
					found = true
					break
				}
			}
			if !found {
				if ps := append(index[name], index[name+".xz"]...); len(ps) > 0 {
					unlisted = append(unlisted, fmt.Sprintf("%s (for %s, in %s)", name, m.Name, strings.Join(ps, " or ")))
					continue
				}
				rep.FirmwareMissing = append(rep.FirmwareMissing, FirmwareRef{Module: m.Name, Name: name})
			}
		}
	}
	if len(unlisted) > 0 {
		return fmt.Errorf("ramdisk: firmware Debian ships in packages firmware-packages.txt does not list (add them): %s", strings.Join(unlisted, "; "))
	}
	written := map[string]bool{}
	for _, p := range pkgs {
		files := perPkg[p.Name]
		if len(files) == 0 {
			continue
		}
		err := piece("firmware "+p.Name, len(files), func() error {
			for _, f := range files {
				st, err := os.Stat(f.host)
				if err != nil {
					return fmt.Errorf("ramdisk: firmware: %w", err)
				}
				dst := path.Join("lib/firmware", f.name)
				if err := addFile(w, dst, f.host, 0o644); err != nil {
					return err
				}
				written[dst] = true
				rep.Firmware = append(rep.Firmware, FirmwareFile{Name: f.name, Package: p.Name, Size: st.Size()})
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	var lost []string
	for _, p := range pkgs {
		for _, f := range perPkg[p.Name] {
			if !written[path.Join("lib/firmware", f.name)] {
				lost = append(lost, f.name)
			}
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("ramdisk: firmware shipped by the packages but not in the initramfs: %s", strings.Join(lost, ", "))
	}
	return nil
}
