package ipa

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// cutDependencies are dependencies of Debian's ironic-python-agent that
// IPA's own images (diskimage-builder's ironic-python-agent-ramdisk) do not
// carry and IPA 13 never imports or runs outside the burn-in steps:
// libguestfs-tools and python3-guestfs (libguestfs, with a whole QEMU system
// emulator, supermin and libvirt), python3-libvirt, stress-ng (burn-in
// only; it brings Mesa and LLVM). Together 600-700 MiB of the 1.1 GiB tree.
// The packages only they pull in are left out of the initramfs; dpkg's
// records stay.
var cutDependencies = []string{"libguestfs-tools", "python3-guestfs", "python3-libvirt", "stress-ng"}

// packKept are installed packages the archive keeps although only a cut
// dependency pulls them in: util-linux-extra is hwclock, which IPA runs
// before every power-off and reboot (standby._sync_clock) and Debian's
// ironic-python-agent does not depend on; without it IPA 13's power_off
// fails ("No such file or directory: 'hwclock'") and the machine stays on.
var packKept = []string{"util-linux-extra"}

// dpkgPackage is one stanza of dpkg's status file.
type dpkgPackage struct {
	Name      string
	Essential bool
	Required  bool // Priority: required
	// Depends are the Depends and Pre-Depends, each a list of
	// alternatives, names only (versions and architectures dropped).
	Depends  [][]string
	Provides []string
}

// parseDpkgStatus reads dpkg's status file (var/lib/dpkg/status): the
// installed packages. Stanzas of packages that are not installed, and
// lines it does not know, are skipped.
func parseDpkgStatus(r io.Reader) ([]dpkgPackage, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var out []dpkgPackage
	var cur dpkgPackage
	installed := false
	last := ""
	flush := func() {
		if cur.Name != "" && installed {
			out = append(out, cur)
		}
		cur, installed, last = dpkgPackage{}, false, ""
	}
	var fields map[string]string
	reset := func() { fields = map[string]string{} }
	reset()
	end := func() {
		cur.Name = strings.TrimSpace(fields["package"])
		installed = strings.HasSuffix(strings.TrimSpace(fields["status"]), " installed")
		cur.Essential = strings.TrimSpace(fields["essential"]) == "yes"
		cur.Required = strings.TrimSpace(fields["priority"]) == "required"
		for _, k := range []string{"pre-depends", "depends"} {
			cur.Depends = append(cur.Depends, parseRelations(fields[k])...)
		}
		for _, alts := range parseRelations(fields["provides"]) {
			cur.Provides = append(cur.Provides, alts...)
		}
		flush()
		reset()
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if len(fields) > 0 {
				end()
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last != "" {
				fields[last] += " " + strings.TrimSpace(line)
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			last = ""
			continue
		}
		last = strings.ToLower(k)
		fields[last] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(fields) > 0 {
		end()
	}
	return out, nil
}

// parseRelations splits "a (>= 1) | b:any, c" into [[a b] [c]].
func parseRelations(s string) [][]string {
	var out [][]string
	for rel := range strings.SplitSeq(s, ",") {
		var alts []string
		for alt := range strings.SplitSeq(rel, "|") {
			f := strings.Fields(alt)
			if len(f) == 0 {
				continue
			}
			name, _, _ := strings.Cut(f[0], ":")
			name, _, _ = strings.Cut(name, "(")
			if name != "" {
				alts = append(alts, name)
			}
		}
		if len(alts) > 0 {
			out = append(out, alts)
		}
	}
	return out
}

// unneeded returns the installed packages that nothing needs once the
// dependencies named in cut are not followed: not reachable from the
// essential and required packages and from roots through the first
// installed alternative of each dependency.
func unneeded(pkgs []dpkgPackage, roots, cut []string) []string {
	byName := map[string]*dpkgPackage{}
	providers := map[string][]string{}
	for i := range pkgs {
		p := &pkgs[i]
		byName[p.Name] = p
		for _, v := range p.Provides {
			providers[v] = append(providers[v], p.Name)
		}
	}
	resolve := func(name string) string {
		if _, ok := byName[name]; ok {
			return name
		}
		if ps := providers[name]; len(ps) > 0 {
			return slices.Min(ps)
		}
		return ""
	}
	keep := map[string]bool{}
	var queue []string
	push := func(name string) {
		if n := resolve(name); n != "" && !keep[n] && !slices.Contains(cut, n) {
			keep[n] = true
			queue = append(queue, n)
		}
	}
	for _, p := range pkgs {
		if p.Essential || p.Required {
			push(p.Name)
		}
	}
	for _, r := range roots {
		push(r)
	}
	for len(queue) > 0 {
		p := byName[queue[0]]
		queue = queue[1:]
		for _, alts := range p.Depends {
			// The first alternative that is installed, as apt chose.
			for _, a := range alts {
				if resolve(a) != "" {
					push(a)
					break
				}
			}
		}
	}
	var drop []string
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		if !keep[name] {
			drop = append(drop, name)
		}
	}
	return drop
}

// droppedFiles returns the files (below root, without a leading "/") of
// the packages unneeded leaves out of the ramdisk, and those packages.
// Paths through the merged-/usr links (/lib, /bin, /sbin, /lib64) are
// given below usr/, where a walk of the tree finds them.
func droppedFiles(root string) (map[string]bool, []string, error) {
	f, err := os.Open(filepath.Join(root, "var/lib/dpkg/status"))
	if err != nil {
		return nil, nil, fmt.Errorf("ipa: %w", err)
	}
	defer f.Close()
	pkgs, err := parseDpkgStatus(f)
	if err != nil {
		return nil, nil, fmt.Errorf("ipa: %s: %w", f.Name(), err)
	}
	drop := unneeded(pkgs, append(slices.Clip(Packages), packKept...), cutDependencies)
	files := map[string]bool{}
	for _, name := range drop {
		var b []byte
		for _, list := range []string{name + ".list", name + ":amd64.list"} {
			if b, err = os.ReadFile(filepath.Join(root, "var/lib/dpkg/info", list)); err == nil {
				break
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("ipa: the files of %s: %w", name, err)
		}
		for line := range strings.Lines(string(b)) {
			rel := strings.TrimPrefix(strings.TrimSpace(line), "/")
			for _, d := range []string{"bin/", "sbin/", "lib/", "lib64/"} {
				if strings.HasPrefix(rel, d) {
					if fi, err := os.Lstat(filepath.Join(root, strings.TrimSuffix(d, "/"))); err == nil && fi.Mode()&os.ModeSymlink != 0 {
						rel = "usr/" + rel
					}
				}
			}
			if fi, err := os.Lstat(filepath.Join(root, rel)); err == nil && !fi.IsDir() {
				files[rel] = true
			}
		}
	}
	return files, drop, nil
}
