package rdinit

import (
	"io/fs"
	"path"
	"strings"
)

// modEntry is one line of the initramfs's module list.
type modEntry struct {
	name    string
	path    string
	deps    []string
	aliases []string
}

// parseModuleList reads the module list written by internal/ramdisk:
// "path<TAB>dep,dep<TAB>alias alias" per line (older lists have the path
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
		e.name = strings.ReplaceAll(strings.TrimSuffix(path.Base(e.path), ".ko"), "-", "_")
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
		out = append(out, e)
	}
	return out
}

// deviceDriver reports whether the module is a driver the kernel would
// load for a device (an alias with a bus prefix: "pci:", "virtio:",
// "acpi*:"), as opposed to a library or file system loaded by name.
func (e modEntry) deviceDriver() bool {
	for _, a := range e.aliases {
		if strings.Contains(a, ":") {
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

// scanModaliases returns the modalias of every device below sysDevices
// (/sys/devices), what udev would hand to modprobe at coldplug.
func scanModaliases(fsys fs.FS) []string {
	var out []string
	seen := map[string]bool{}
	_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a vanished or unreadable device: skip it
		}
		if d.IsDir() || d.Name() != "modalias" {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil
		}
		m := strings.TrimSpace(string(b))
		if m != "" && !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
		return nil
	})
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

// modulesFor picks the modules to load given the devices present: every
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
		if e.deviceDriver() && e.matches(modaliases) || !e.deviceDriver() && !needed[e.name] {
			want = append(want, e)
		}
	}
	return withDeps(entries, want, loaded)
}
