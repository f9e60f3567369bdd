package ramdisk

import (
	_ "embed"
	"fmt"
	"strings"
)

// ManifestEntry is one line of a manifest (modules.txt or
// firmware-packages.txt).
type ManifestEntry struct {
	Name  string
	Group string // the "[group]" the line is in, "" before any
	// Optional says the kernel may lack it: the build reports it absent
	// with OptionalReason instead of failing.
	Optional       bool
	OptionalReason string
	// OnDemand modules are carried but not loaded at boot: the code that
	// needs one loads it (8021q before a VLAN link), and loading it
	// unasked would change the machine (bonding makes a bond0 that the
	// inventory and Ironic's discovery would report as a NIC).
	OnDemand bool
	Comment  string // the hardware it is for
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
// firmware-packages.txt.
func FirmwarePackages() []string {
	m, err := ParseManifest(firmwareManifest)
	if err != nil {
		panic(err)
	}
	var out []string
	for _, e := range m {
		out = append(out, e.Name)
	}
	return out
}

// ParseManifest reads a manifest: "[group]" lines, and "NAME [ondemand]
// [optional: REASON] [# COMMENT]" lines; "#" lines and blank lines are
// skipped. A name given twice is an error.
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
		e := ManifestEntry{Name: name, Group: group, Comment: strings.TrimSpace(comment)}
		rest = strings.TrimSpace(rest)
		if word, after, _ := strings.Cut(rest, " "); word == "ondemand" {
			e.OnDemand, rest = true, strings.TrimSpace(after)
		}
		if rest != "" {
			reason, ok := strings.CutPrefix(rest, "optional:")
			if !ok || strings.TrimSpace(reason) == "" {
				return nil, fmt.Errorf("ramdisk: manifest line %d: after the name %s want \"ondemand\" and/or \"optional: REASON\", got %q", i+1, name, rest)
			}
			e.Optional, e.OptionalReason = true, strings.TrimSpace(reason)
		}
		if prev, ok := seen[name]; ok {
			return nil, fmt.Errorf("ramdisk: manifest line %d: %s is listed already on line %d", i+1, name, prev)
		}
		seen[name] = i + 1
		out = append(out, e)
	}
	return out, nil
}

// DefaultModules returns the names of the manifest's modules (see
// Manifest): what the initramfs carries, with their dependency closure.
func DefaultModules() []string {
	var out []string
	for _, e := range Manifest() {
		out = append(out, e.Name)
	}
	return out
}

// manifestFor returns the manifest entries for names: the manifest when
// names is nil, else each name with the manifest's entry for it (so an
// optional module stays optional) or a plain entry.
func manifestFor(names []string) []ManifestEntry {
	m := Manifest()
	if names == nil {
		return m
	}
	byName := map[string]ManifestEntry{}
	for _, e := range m {
		byName[e.Name] = e
	}
	var out []ManifestEntry
	for _, n := range names {
		e, ok := byName[n]
		if !ok {
			e = ManifestEntry{Name: n}
		}
		out = append(out, e)
	}
	return out
}
