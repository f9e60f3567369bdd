package ramdisk

import (
	"cmp"
	_ "embed"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
)

// ManifestEntry is one line of a manifest (modules.txt or
// firmware-packages.txt): a module or package (Name), or in modules.txt
// a subtree of the kernel's modules to take (Dir) or a part of those to
// leave out (Exclude).
type ManifestEntry struct {
	Name string
	// Dir is a "dir PATH" line: every module below PATH (relative to
	// lib/modules/<version>, e.g. kernel/drivers/scsi), minus the
	// exclusions.
	Dir string `json:",omitempty"`
	// Exclude is an "exclude PATTERN" line, whose Comment is the reason:
	// a path below lib/modules/<version> (every module below it) or a
	// module name glob (path.Match: "*_cs"). It applies to the modules
	// Dir lines take, never to a module named on a line of its own nor
	// to a dependency of one taken.
	Exclude string `json:",omitempty"`
	Group   string // the "[group]" the line is in, "" before any
	// Optional says the kernel may lack it: the build reports it absent
	// with OptionalReason instead of failing.
	Optional       bool
	OptionalReason string
	// OnDemand modules are carried but not loaded at boot: the code that
	// needs one loads it (8021q before a VLAN link), and loading it
	// unasked would change the machine (bonding makes a bond0 that the
	// inventory and Ironic's discovery would report as a NIC).
	OnDemand bool
	// Arch is the only architecture (Arches) the line is for, from a
	// "[arm64]" after the name; "" for every one.
	Arch    string `json:",omitempty"`
	Comment string // the hardware it is for
}

//go:embed modules.txt
var modulesManifest string

//go:embed firmware-packages.txt
var firmwareManifest string

// Manifest returns the reviewed module list, modules.txt.
func Manifest() []ManifestEntry {
	m, err := ParseManifest(modulesManifest)
	if err != nil {
		// The file is part of the source; TestManifest keeps it parsing.
		panic(err)
	}
	return m
}

// FirmwarePackages returns the Debian packages firmware is taken from,
// firmware-packages.txt: an optional one is one some flavours' suites do
// not have (FetchFirmware skips it there).
func FirmwarePackages() []ManifestEntry {
	m, err := ParseManifest(firmwareManifest)
	if err != nil {
		panic(err)
	}
	return m
}

// ParseManifest reads a manifest: "[group]" lines, "dir PATH [# COMMENT]"
// and "exclude PATTERN # REASON" lines, and "NAME [[ARCH]] [ondemand]
// [optional: REASON] [# COMMENT]" lines (ARCH one of Arches: the line is
// for that architecture only); "#" lines and blank lines are skipped. A
// name, directory or exclusion given twice is an error, and so is an
// exclusion without a reason.
func ParseManifest(text string) ([]ManifestEntry, error) {
	var out []ManifestEntry
	group := ""
	seen := map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		body, comment, _ := strings.Cut(line, "#")
		body = strings.TrimSpace(body)
		if body == "" {
			continue
		}
		if strings.HasPrefix(body, "[") {
			if !strings.HasSuffix(body, "]") || len(body) < 3 {
				return nil, fmt.Errorf("ramdisk: manifest line %d: bad group %q", i+1, body)
			}
			group = body[1 : len(body)-1]
			continue
		}
		name, rest, _ := strings.Cut(body, " ")
		rest = strings.TrimSpace(rest)
		e := ManifestEntry{Name: name, Group: group, Comment: strings.TrimSpace(comment)}
		key := name
		switch name {
		case "dir", "exclude":
			if rest == "" || strings.ContainsAny(rest, " \t") {
				return nil, fmt.Errorf("ramdisk: manifest line %d: want %q and one path or pattern, got %q", i+1, name, body)
			}
			if _, err := path.Match(rest, ""); err != nil || path.Clean(rest) != rest || !path.IsAbs("/"+rest) || strings.HasPrefix(rest, "../") {
				return nil, fmt.Errorf("ramdisk: manifest line %d: bad %s %q (a clean relative path or a module name pattern)", i+1, name, rest)
			}
			e.Name, key = "", name+" "+rest
			if name == "dir" {
				e.Dir = rest
			} else {
				e.Exclude = rest
				if e.Comment == "" {
					return nil, fmt.Errorf("ramdisk: manifest line %d: exclude %s without a reason (a \"# REASON\" comment)", i+1, rest)
				}
			}
			rest = ""
		default:
			if strings.HasPrefix(rest, "[") {
				q, after, _ := strings.Cut(rest, " ")
				a, err := LookupArch(strings.TrimSuffix(strings.TrimPrefix(q, "["), "]"))
				if !strings.HasSuffix(q, "]") || q == "[]" || err != nil {
					return nil, fmt.Errorf("ramdisk: manifest line %d: after the name %s, %q is not an architecture in brackets (%s)", i+1, name, q, archNames())
				}
				e.Arch, rest = a.Name, strings.TrimSpace(after)
			}
			if word, after, _ := strings.Cut(rest, " "); word == "ondemand" {
				e.OnDemand, rest = true, strings.TrimSpace(after)
			}
		}
		if rest != "" {
			reason, ok := strings.CutPrefix(rest, "optional:")
			if !ok || strings.TrimSpace(reason) == "" {
				return nil, fmt.Errorf("ramdisk: manifest line %d: after the name %s want \"ondemand\" and/or \"optional: REASON\", got %q", i+1, name, rest)
			}
			e.Optional, e.OptionalReason = true, strings.TrimSpace(reason)
		}
		if prev, ok := seen[key]; ok {
			return nil, fmt.Errorf("ramdisk: manifest line %d: %s is listed already on line %d", i+1, key, prev)
		}
		seen[key] = i + 1
		out = append(out, e)
	}
	return out, nil
}

// DefaultModules returns the names of the modules the manifest's lines
// name on their own (see Manifest) for DefaultArch; its Dir lines add
// more, resolved against a kernel's tree at build time (SelectModules).
func DefaultModules() []string {
	var out []string
	for _, e := range ManifestForArch(Manifest(), DefaultArch) {
		if e.Name != "" {
			out = append(out, e.Name)
		}
	}
	return out
}

// manifestFor returns the manifest entries to build with: the whole
// manifest m (nil: modules.txt) (its named modules, subtrees and exclusions) when names is
// nil, else only names, each with the manifest's entry for it (so an
// optional module stays optional) or a plain entry; then add the same way.
// A module the caller names is taken whatever architecture its manifest
// line is for: the caller asked for it.
func manifestFor(m []ManifestEntry, names, add []string) []ManifestEntry {
	if m == nil {
		m = Manifest()
	}
	byName := map[string]ManifestEntry{}
	for _, e := range m {
		if e.Name != "" {
			byName[e.Name] = e
		}
	}
	var out []ManifestEntry
	if names == nil {
		out = m
	}
	for _, n := range append(slices.Clone(names), add...) {
		e, ok := byName[n]
		if !ok {
			e = ManifestEntry{Name: n}
		}
		if names == nil && ok && e.Arch == "" {
			continue // in the manifest already
		}
		// Named by the caller: for whatever architecture is built.
		e.Arch = ""
		out = append(out, e)
	}
	return out
}

// ManifestForArch returns the entries of m for architecture arch: those
// for every architecture and those marked for arch.
func ManifestForArch(m []ManifestEntry, arch string) []ManifestEntry {
	var out []ManifestEntry
	for _, e := range m {
		if e.Arch == "" || e.Arch == arch {
			out = append(out, e)
		}
	}
	return out
}

// Exclusion is one exclude line's effect on a kernel: the modules of the
// kernel it covers (whether a Dir line reaches them or not).
type Exclusion struct {
	Pattern, Reason string
	Modules         int
}

// SelectModules resolves entries against tree: the modules each Dir line
// takes (minus the exclusions) and each named module, with the group of
// its line (a module both named and below a Dir takes its named line's
// group), in manifest order; the built-in, absent optional and excluded
// ones for the report. A named module the kernel lacks (neither a file
// nor built in) fails unless optional, and so does a Dir with no module
// below it. A named module is taken whatever the exclusions say.
func SelectModules(tree *kmod.Tree, entries []ManifestEntry, kernelVersion string) (names []string, group map[string]string, rep Report, err error) {
	var excl []ManifestEntry
	for _, e := range entries {
		if e.Exclude != "" {
			excl = append(excl, e)
		}
	}
	excluded := func(name, rel string) (string, bool) {
		for _, x := range excl {
			if strings.Contains(x.Exclude, "/") {
				if rel == x.Exclude || strings.HasPrefix(rel, x.Exclude+"/") {
					return x.Exclude, true
				}
			} else if ok, _ := path.Match(kmod.Normalize(x.Exclude), name); ok {
				return x.Exclude, true
			}
		}
		return "", false
	}
	counts := map[string]int{}
	for _, name := range tree.Names() {
		if x, ok := excluded(name, tree.Path(name)); ok {
			counts[x]++
		}
	}
	for _, x := range excl {
		rep.Excluded = append(rep.Excluded, Exclusion{Pattern: x.Exclude, Reason: x.Comment, Modules: counts[x.Exclude]})
	}
	group = map[string]string{}
	named := map[string]bool{}
	for _, e := range entries {
		if e.Name != "" {
			named[kmod.Normalize(e.Name)] = true
		}
	}
	var absent, bad []string
	add := func(n, g string) {
		n = kmod.Normalize(n)
		if _, ok := group[n]; ok {
			return
		}
		group[n] = cmp.Or(g, "(not in the manifest)")
		names = append(names, n)
	}
	for _, e := range entries {
		switch {
		case e.Exclude != "":
		case e.Dir != "":
			below := tree.Below(e.Dir)
			if len(below) == 0 && !e.Optional {
				bad = append(bad, fmt.Sprintf("dir %s has no module", e.Dir))
			}
			for _, n := range below {
				if _, ok := excluded(n, tree.Path(n)); ok || named[n] {
					continue
				}
				add(n, e.Group)
			}
		case tree.Has(e.Name):
			add(e.Name, e.Group)
		case tree.Builtin(e.Name):
			rep.Builtin = append(rep.Builtin, e.Name)
		case e.Optional:
			rep.Absent = append(rep.Absent, e.Name+": "+e.OptionalReason)
		default:
			absent = append(absent, e.Name)
		}
	}
	if len(absent) > 0 {
		return nil, nil, Report{}, fmt.Errorf("ramdisk: module %s not found in kernel %s: neither a module file nor built in (mark it optional in the manifest with a reason, or drop it)",
			strings.Join(absent, ", "), kernelVersion)
	}
	if len(bad) > 0 {
		return nil, nil, Report{}, fmt.Errorf("ramdisk: manifest against kernel %s: %s", kernelVersion, strings.Join(bad, "; "))
	}
	return names, group, rep, nil
}
