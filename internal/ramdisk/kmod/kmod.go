// Package kmod finds Linux kernel modules in an extracted kernel package and
// orders a set of them, with everything they depend on, for loading with
// finit_module (dependencies first).
//
// Dependencies come from each module's own .modinfo section ("depends=" and
// "softdep=pre:"), which is what depmod turns into modules.dep, so no depmod
// run (and no kmod package) is needed to build a ramdisk.
package kmod

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Module is one loadable module.
type Module struct {
	Name string // normalised: "-" replaced by "_"
	// Path is relative to the modules directory, e.g.
	// kernel/drivers/block/virtio_blk.ko, or virtio_blk.ko.xz when the
	// kernel package ships compressed modules (read them with ReadModule).
	Path string
	// Deps are the modules (of the resolved set) to load before this one.
	Deps []string
	// Aliases are the module's "alias=" patterns: device modaliases
	// (pci:v00008086d..., virtio:d00000002v*) and names (fs-efivarfs).
	Aliases []string
	// Firmware are the files below /lib/firmware the module may ask for
	// ("firmware=", what modinfo -F firmware prints).
	Firmware []string `json:",omitempty"`
}

// Tree is the set of modules below one lib/modules/<version> directory.
type Tree struct {
	Dir     string
	paths   map[string]string // normalised name -> relative path
	builtin map[string]bool
}

// Normalize returns the module name the kernel uses: '-' and '_' are the same.
func Normalize(name string) string { return strings.ReplaceAll(name, "-", "_") }

// extensions are the module file names depmod knows: plain, and the three
// compressions kmod's CONFIG_MODULE_COMPRESS_* produce.
var extensions = [...]string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"}

func nameOf(file string) (name string, ok bool) {
	base := filepath.Base(file)
	for _, ext := range extensions {
		if strings.HasSuffix(base, ext) {
			return Normalize(strings.TrimSuffix(base, ext)), true
		}
	}
	return "", false
}

// PlainPath returns path with a compression suffix removed: where the
// decompressed module goes (virtio_blk.ko.xz -> virtio_blk.ko).
func PlainPath(path string) string {
	for _, ext := range extensions[1:] {
		if strings.HasSuffix(path, ext) {
			return strings.TrimSuffix(path, ext) + ".ko"
		}
	}
	return path
}

// MaxModuleSize bounds a decompressed module (the largest in a Debian
// kernel, amdgpu, is about 20 MiB), so a corrupt or hostile file cannot
// make the build eat memory.
const MaxModuleSize = 64 << 20

// ReadModule returns the module's ELF bytes, decompressing .ko.xz,
// .ko.zst and .ko.gz (recognised by their magic bytes, whatever the name
// says). The kernel's signature is appended to the plain module before
// compression, so the result still carries it and loads under
// module.sig_enforce.
func ReadModule(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kmod: %w", err)
	}
	defer f.Close()
	data, err := decompress(f)
	if err != nil {
		return nil, fmt.Errorf("kmod: %s: %w", path, err)
	}
	return data, nil
}

// decompress reads r whole, through the decoder its magic bytes call for.
func decompress(r io.Reader) ([]byte, error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(6)
	var in io.Reader = br
	kind := ""
	switch {
	case bytes.HasPrefix(magic, []byte("\xfd7zXZ\x00")):
		kind = "xz"
		xr, err := xz.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("xz: %w", err)
		}
		in = xr
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		kind = "zstd"
		// One decoder goroutine and a window no larger than a module can
		// be: a corrupt header cannot ask for gigabytes.
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(MaxModuleSize), zstd.WithDecoderMaxMemory(MaxModuleSize))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		defer zr.Close()
		in = zr
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		kind = "gzip"
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		in = zr
	}
	data, err := io.ReadAll(io.LimitReader(in, MaxModuleSize+1))
	if err != nil {
		if kind != "" {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		return nil, err
	}
	if len(data) > MaxModuleSize {
		return nil, fmt.Errorf("larger than %d MiB", MaxModuleSize>>20)
	}
	return data, nil
}

// Open indexes the modules below dir (a lib/modules/<version> directory).
func Open(dir string) (*Tree, error) {
	t := &Tree{Dir: dir, paths: map[string]string{}, builtin: map[string]bool{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if n, ok := nameOf(p); ok {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			t.paths[n] = rel
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kmod: index %s: %w", dir, err)
	}
	if len(t.paths) == 0 {
		return nil, fmt.Errorf("kmod: no modules below %s", dir)
	}
	// modules.builtin lists modules compiled into the kernel: asking for one
	// of those is not an error, there is just nothing to load.
	if b, err := os.ReadFile(filepath.Join(dir, "modules.builtin")); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if n, ok := nameOf(strings.TrimSpace(line)); ok {
				t.builtin[n] = true
			}
		}
	}
	return t, nil
}

// Has reports whether the tree has a module file for name.
func (t *Tree) Has(name string) bool {
	_, ok := t.paths[Normalize(name)]
	return ok
}

// Path returns the module file of name relative to the tree's directory,
// or "" when the tree has none.
func (t *Tree) Path(name string) string { return t.paths[Normalize(name)] }

// Names returns the names of every module file of the tree, sorted.
func (t *Tree) Names() []string { return slices.Sorted(maps.Keys(t.paths)) }

// Below returns the names of the module files below dir (relative to the
// tree's directory, e.g. kernel/drivers/scsi), sorted by path.
func (t *Tree) Below(dir string) []string {
	dir = strings.TrimSuffix(filepath.ToSlash(dir), "/") + "/"
	var out []string
	for n, p := range t.paths {
		if strings.HasPrefix(filepath.ToSlash(p), dir) {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(t.paths[a], t.paths[b]) })
	return out
}

// Builtin reports whether name is compiled into the kernel
// (modules.builtin).
func (t *Tree) Builtin(name string) bool { return t.builtin[Normalize(name)] }

// ModInfo returns the key=value pairs of a module's .modinfo section
// (plain or compressed module).
func ModInfo(path string) ([][2]string, error) {
	data, err := ReadModule(path)
	if err != nil {
		return nil, err
	}
	return modInfo(path, data)
}

func modInfo(path string, data []byte) ([][2]string, error) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("kmod: %s: %w", path, err)
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("kmod: %s: no .modinfo section", path)
	}
	info, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("kmod: %s: read .modinfo: %w", path, err)
	}
	return ParseModInfo(info), nil
}

// ParseModInfo splits a .modinfo section: NUL-separated key=value strings.
func ParseModInfo(data []byte) [][2]string {
	var out [][2]string
	for f := range bytes.SplitSeq(data, []byte{0}) {
		if k, v, ok := bytes.Cut(f, []byte{'='}); ok && len(k) > 0 {
			out = append(out, [2]string{string(k), string(v)})
		}
	}
	return out
}

// Deps returns the modules that must be loaded before the module: its hard
// dependencies and its "softdep pre:" ones (some of those are requested
// through request_module at run time, which cannot work without modprobe).
func Deps(info [][2]string) []string {
	var out []string
	for _, kv := range info {
		switch kv[0] {
		case "depends":
			for d := range strings.SplitSeq(kv[1], ",") {
				if d = strings.TrimSpace(d); d != "" {
					out = append(out, Normalize(d))
				}
			}
		case "softdep":
			// "pre: a b post: c"
			sc := bufio.NewScanner(strings.NewReader(kv[1]))
			sc.Split(bufio.ScanWords)
			pre := false
			for sc.Scan() {
				w := sc.Text()
				switch {
				case w == "pre:":
					pre = true
				case strings.HasSuffix(w, ":"):
					pre = false
				case pre:
					out = append(out, Normalize(w))
				}
			}
		}
	}
	return out
}

// Resolve returns the named modules and their dependency closure, each
// module after everything it depends on. Built-in modules are skipped;
// unknown names are an error. Soft dependencies that are missing are
// skipped, since the kernel treats them as optional.
func (t *Tree) Resolve(names []string) ([]Module, error) {
	var order []Module
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n string, soft bool, from string) error
	visit = func(n string, soft bool, from string) error {
		switch state[n] {
		case 2:
			return nil
		case 1:
			return nil // a cycle (softdeps can make one): the first visit places it
		}
		rel, ok := t.paths[n]
		if !ok {
			if t.builtin[n] || soft {
				state[n] = 2
				return nil
			}
			if from != "" {
				return fmt.Errorf("kmod: module %s (needed by %s) not found below %s", n, from, t.Dir)
			}
			return fmt.Errorf("kmod: module %s not found below %s", n, t.Dir)
		}
		state[n] = 1
		info, err := ModInfo(filepath.Join(t.Dir, rel))
		if err != nil {
			return err
		}
		hard := map[string]bool{}
		for _, kv := range info {
			if kv[0] == "depends" {
				for d := range strings.SplitSeq(kv[1], ",") {
					hard[Normalize(strings.TrimSpace(d))] = true
				}
			}
		}
		mod := Module{Name: n, Path: rel}
		for _, d := range Deps(info) {
			if err := visit(d, !hard[d], n); err != nil {
				return err
			}
			if _, ok := t.paths[d]; ok && d != n {
				mod.Deps = append(mod.Deps, d)
			}
		}
		for _, kv := range info {
			switch {
			case kv[1] == "":
			case kv[0] == "alias":
				mod.Aliases = append(mod.Aliases, kv[1])
			case kv[0] == "firmware":
				mod.Firmware = append(mod.Firmware, kv[1])
			}
		}
		state[n] = 2
		order = append(order, mod)
		return nil
	}
	for _, n := range names {
		if err := visit(Normalize(n), false, ""); err != nil {
			return nil, err
		}
	}
	return order, nil
}
