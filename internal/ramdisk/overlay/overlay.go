// Package overlay builds a second initramfs archive that extends a released
// ramdisk without rebuilding it: the kernel unpacks archives concatenated
// in one initrd one after the other into the same root, so files of the
// overlay land beside (or over) the ramdisk's. Operators add configuration
// (/etc/ironic-python-agent.d/*.conf), a CA, authorized keys, steps.d
// executables, kernel modules and firmware, and programs with the shared
// libraries they need.
//
// Modules go below lib/modules/<kernel release>/updates and into a list
// of their own, etc/ironic-agent/modules.d/overlay.list, in the format of
// the ramdisk's module list: the init loads them as it loads its own (a
// device driver when its device is present, any other module always).
// Every module the overlay packs must carry its signature unless the
// spec allows unsigned ones.
package overlay

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/initramfs"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
)

// ModuleListDir is where the init looks for module lists beside the
// ramdisk's own; ListPath is the overlay's.
const (
	ModuleListDir = "etc/ironic-agent/modules.d"
	ListPath      = ModuleListDir + "/overlay.list"
)

// Spec says what goes into an overlay.
type Spec struct {
	// Base is the released initramfs the overlay extends: its kernel
	// release (for modules) and the files it has (a program's libraries
	// it already carries are not copied again). Needed for Modules and
	// Programs.
	Base string
	// Files are "DEST=SRC": the host file SRC at DEST in the ramdisk.
	Files []string
	// Dirs are host directories whose trees are copied to the ramdisk's
	// root as they are (DIR/etc/x becomes /etc/x).
	Dirs []string
	// Programs are host programs, "SRC" (to usr/local/bin) or "SRC=DEST",
	// each with the shared libraries it needs that Base lacks.
	Programs []string
	// Modules are kernel module files (.ko, .ko.xz, ...) built for
	// Base's kernel; Firmware "NAME=SRC" files below lib/firmware.
	Modules  []string
	Firmware []string
	// AllowUnsignedModules packs kernel modules without an appended
	// signature, for sites that boot without Secure Boot: a kernel in
	// lockdown refuses them at load.
	AllowUnsignedModules bool
}

// Entry is one file the overlay holds, for the report.
type Entry struct {
	Path string // in the ramdisk, without a leading slash
	From string // the host file, or what made it
	Size int64
}

// Build writes the overlay (gzip over newc) to w and returns what it
// holds. Every problem is an error naming the file and the reason; w then
// holds no usable archive.
func Build(spec Spec, w io.Writer) ([]Entry, error) {
	b := &builder{files: map[string]Entry{}, src: map[string]string{}, data: map[string][]byte{}, links: map[string]string{}}
	if spec.Base != "" {
		if err := b.readBase(spec.Base); err != nil {
			return nil, err
		}
	} else if len(spec.Modules) > 0 || len(spec.Programs) > 0 {
		return nil, errors.New("overlay: modules and programs need the ramdisk's initramfs (-base): its kernel release and the libraries it already has")
	}
	for _, d := range spec.Dirs {
		if err := b.addDir(d); err != nil {
			return nil, err
		}
	}
	for _, f := range spec.Files {
		dest, src, ok := strings.Cut(f, "=")
		if !ok || dest == "" || src == "" {
			return nil, fmt.Errorf("overlay: file %q: want DEST=SRC", f)
		}
		if err := b.addFile(dest, src, ""); err != nil {
			return nil, err
		}
	}
	for _, f := range spec.Firmware {
		name, src, ok := strings.Cut(f, "=")
		if !ok || name == "" || src == "" {
			return nil, fmt.Errorf("overlay: firmware %q: want NAME=SRC (NAME as the driver asks for it, below lib/firmware)", f)
		}
		if err := b.addFile(path.Join("lib/firmware", name), src, ""); err != nil {
			return nil, err
		}
	}
	var list strings.Builder
	deps := map[string][]string{} // module -> the modules it needs
	for _, m := range spec.Modules {
		name, needs, line, err := b.addModule(m)
		if err != nil {
			return nil, err
		}
		deps[name] = needs
		list.WriteString(line)
	}
	// A dependency neither the ramdisk nor the overlay carries would
	// leave the module's symbols unresolved at boot.
	for _, name := range sortedNames(deps) {
		for _, d := range deps[name] {
			if _, ok := deps[d]; !ok && !b.baseModules[d] {
				return nil, fmt.Errorf("overlay: module %s needs module %s, which the ramdisk does not carry: add it with another -module", name, d)
			}
		}
	}
	if list.Len() > 0 {
		b.data[ListPath] = []byte(list.String())
		b.files[ListPath] = Entry{Path: ListPath, From: "the overlay's module list", Size: int64(list.Len())}
	}
	for _, p := range spec.Programs {
		if err := b.addProgram(p); err != nil {
			return nil, err
		}
	}
	if !spec.AllowUnsignedModules {
		if err := b.checkSignatures(); err != nil {
			return nil, err
		}
	}
	return b.entries(), b.write(w)
}

// checkSignatures refuses a kernel module the overlay packs (by -module,
// -dir or -file) that carries no signature: under UEFI Secure Boot
// Debian's kernel locks itself down and refuses it at boot, far from the
// build that could have said so.
func (b *builder) checkSignatures() error {
	for _, e := range b.entries() {
		src, ok := b.src[e.Path]
		if _, isModule := moduleName(e.Path); !ok || !isModule {
			continue
		}
		if err := ramdisk.ModuleFileSignature(src); err != nil {
			return fmt.Errorf("overlay: module /%s (from %s): %w; a Secure Boot kernel in lockdown refuses unsigned modules: sign it (the kernel's scripts/sign-file) with a key the kernel trusts, or pass -allow-unsigned-modules for machines that boot without Secure Boot", e.Path, src, err)
		}
	}
	return nil
}

type builder struct {
	files map[string]Entry  // by path
	src   map[string]string // host file of a path
	data  map[string][]byte // generated files
	links map[string]string // symbolic links: path -> target
	// base: the ramdisk's files, its modules' names and its kernel
	// release.
	base        map[string]bool
	baseModules map[string]bool
	release     string
	// arch is the base's architecture, told by the multiarch library
	// directory its programs' libraries are in (DefaultArch when it
	// carries none).
	arch ramdisk.Arch
}

// readBase lists the base initramfs's files and finds its kernel release.
func (b *builder) readBase(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("overlay: base initramfs: %w", err)
	}
	defer f.Close()
	r, err := decompress(f)
	if err != nil {
		return fmt.Errorf("overlay: base initramfs %s: %w", p, err)
	}
	names, err := initramfs.ReadNames(r)
	if err != nil {
		return fmt.Errorf("overlay: base initramfs %s: %w", p, err)
	}
	b.base = map[string]bool{}
	b.baseModules = map[string]bool{}
	for _, n := range names {
		b.base[n] = true
		if rest, ok := strings.CutPrefix(n, "lib/modules/"); ok && !strings.Contains(rest, "/") && b.release == "" {
			b.release = rest
		}
		if name, ok := moduleName(n); ok && strings.HasPrefix(n, "lib/modules/") {
			b.baseModules[name] = true
		}
	}
	if b.release == "" {
		return fmt.Errorf("overlay: base initramfs %s has no lib/modules/<release>: is it the ramdisk's initramfs?", p)
	}
	b.arch, _ = ramdisk.LookupArch(ramdisk.DefaultArch)
	for _, a := range ramdisk.Arches() {
		for _, n := range names {
			if strings.HasPrefix(n, "lib/"+a.Multiarch+"/") || strings.HasPrefix(n, "usr/lib/"+a.Multiarch+"/") {
				b.arch = a
				break
			}
		}
	}
	return nil
}

// decompress opens a gzip, zstd or xz stream, or an uncompressed archive.
func decompress(f io.Reader) (io.Reader, error) {
	var magic [6]byte
	n, err := io.ReadFull(f, magic[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	br := io.MultiReader(bytes.NewReader(magic[:n]), f)
	switch {
	case bytes.HasPrefix(magic[:n], []byte{0x1f, 0x8b}):
		return gzip.NewReader(br)
	case bytes.HasPrefix(magic[:n], []byte{0x28, 0xb5, 0x2f, 0xfd}):
		d, err := zstd.NewReader(br)
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	case bytes.HasPrefix(magic[:n], []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return xz.NewReader(br)
	case bytes.HasPrefix(magic[:n], []byte("070701")):
		return br, nil
	}
	return nil, fmt.Errorf("neither a newc archive nor gzip, zstd or xz (starts % x)", magic[:n])
}

// add records an entry, refusing two sources for one path.
func (b *builder) add(e Entry) error {
	if old, ok := b.files[e.Path]; ok {
		return fmt.Errorf("overlay: /%s comes from both %s and %s", e.Path, old.From, e.From)
	}
	b.files[e.Path] = e
	return nil
}

// addFile puts host file src at dest (mode kept). from names what asked
// for it when that is not src itself (a program's library).
func (b *builder) addFile(dest, src, from string) error {
	dest = strings.TrimPrefix(path.Clean("/"+dest), "/")
	if dest == "" {
		return fmt.Errorf("overlay: %s: no destination path", src)
	}
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("overlay: %s is not a regular file", src)
	}
	if from == "" {
		from = src
	}
	if err := b.add(Entry{Path: dest, From: from, Size: st.Size()}); err != nil {
		return err
	}
	b.src[dest] = src
	return nil
}

// addDir adds every regular file and symbolic link below dir.
func (b *builder) addDir(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("overlay: %w", err)
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("overlay: %w", err)
			}
			b.links[filepath.ToSlash(rel)] = target
			return b.add(Entry{Path: filepath.ToSlash(rel), From: p + " (link to " + target + ")"})
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("overlay: %s: neither a file, a directory nor a link", p)
		}
		return b.addFile(filepath.ToSlash(rel), p, "")
	})
}

// moduleName is the kernel's name of a module file name, and whether it
// is one.
func moduleName(p string) (string, bool) {
	base := path.Base(p)
	for _, suffix := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
		if n, ok := strings.CutSuffix(base, suffix); ok {
			return kmod.Normalize(n), true
		}
	}
	return "", false
}

func sortedNames(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// addModule adds a module file, checked against the base's kernel, and
// returns its name, the modules it needs and its module-list line.
func (b *builder) addModule(src string) (string, []string, string, error) {
	name, ok := moduleName(src)
	if !ok {
		return "", nil, "", fmt.Errorf("overlay: module %s: not a kernel module file name (.ko, .ko.xz, .ko.zst, .ko.gz)", src)
	}
	info, err := kmod.ModInfo(src)
	if err != nil {
		return "", nil, "", fmt.Errorf("overlay: module %s: %w", src, err)
	}
	var vermagic string
	var aliases, deps []string
	for _, kv := range info {
		switch kv[0] {
		case "vermagic":
			vermagic = kv[1]
		case "alias":
			if !strings.ContainsAny(kv[1], " \t\n") {
				aliases = append(aliases, kv[1])
			}
		}
	}
	deps = kmod.Deps(info)
	if rel, _, _ := strings.Cut(vermagic, " "); rel != b.release {
		return "", nil, "", fmt.Errorf("overlay: module %s was built for kernel %q, and the ramdisk runs %s: the kernel would refuse it; build it against %s's headers", src, rel, b.release, b.release)
	}
	dest := path.Join("lib/modules", b.release, "updates", filepath.Base(src))
	if err := b.addFile(dest, src, ""); err != nil {
		return "", nil, "", err
	}
	return name, deps, fmt.Sprintf("/%s\t%s\t%s\n", dest, strings.Join(deps, ","), strings.Join(aliases, " ")), nil
}

// addProgram adds a host program and, transitively, the libraries (and
// the loader) it needs that the base does not carry.
func (b *builder) addProgram(spec string) error {
	src, dest, ok := strings.Cut(spec, "=")
	if !ok {
		dest = path.Join("usr/local/bin", filepath.Base(src))
	}
	if err := b.addFile(dest, src, ""); err != nil {
		return err
	}
	// A host program of another machine than the ramdisk's (an amd64
	// host's program in an arm64 ramdisk) could never run there.
	if f, err := elf.Open(src); err == nil {
		err = b.arch.CheckELF(src, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("overlay: program for the %s ramdisk: %w", b.arch.Name, err)
		}
	}
	// Where glibc's loader looks for libraries without a cache, in its
	// order, and where the host's libraries are taken from.
	libDirs := b.arch.LibDirs()
	queue := []string{src}
	seen := map[string]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		interp, needed, err := ramdisk.ELFNeeds(p)
		if err != nil {
			return fmt.Errorf("overlay: program %s: %s: %w", src, p, err)
		}
		var want []string
		if interp != "" {
			rel := strings.TrimPrefix(interp, "/")
			if !b.base[rel] && b.hasLibc() {
				return fmt.Errorf("overlay: program %s needs the loader %s, which the ramdisk does not carry: the host's is another build of the C library than the ramdisk's and would not match it; link the program statically", src, interp)
			}
			want = append(want, rel)
		}
		for _, lib := range needed {
			found := ""
			for _, d := range libDirs {
				if b.base[path.Join(d, lib)] {
					found = "base"
					break
				}
			}
			if found != "" {
				continue
			}
			if glibcPart(lib) && b.hasLibc() {
				// The parts of glibc share private interfaces: one
				// from another build fails at start or later.
				return fmt.Errorf("overlay: program %s needs %s (through %s), a part of the C library the ramdisk does not carry: the host's would not match the ramdisk's libc.so.6; link the program statically, or use one that does without it", src, lib, p)
			}
			for _, d := range libDirs {
				if _, err := os.Stat("/" + path.Join(d, lib)); err == nil {
					found = path.Join(d, lib)
					break
				}
			}
			if found == "" {
				return fmt.Errorf("overlay: program %s needs %s (through %s), which neither the ramdisk nor this host (%s) has", src, lib, p, strings.Join(libDirs, ", "))
			}
			want = append(want, found)
		}
		for _, rel := range want {
			if seen[rel] || b.base[rel] {
				continue
			}
			seen[rel] = true
			real, err := filepath.EvalSymlinks("/" + rel)
			if err != nil {
				return fmt.Errorf("overlay: program %s: %w", src, err)
			}
			if err := b.addFile(rel, real, real+" (for "+src+")"); err != nil {
				return err
			}
			queue = append(queue, real)
		}
	}
	return nil
}

// hasLibc reports whether the base carries the C library, whose other
// parts then must come from the same build.
func (b *builder) hasLibc() bool {
	for _, d := range b.arch.LibDirs() {
		if b.base[path.Join(d, "libc.so.6")] {
			return true
		}
	}
	return false
}

// glibcPart reports whether soname is one of glibc's own libraries (the
// loader, libc and the libraries built with it), which must all come from
// one build.
func glibcPart(soname string) bool {
	switch soname {
	case "libc.so.6", "libm.so.6", "libmvec.so.1", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libresolv.so.2",
		"libutil.so.1", "libanl.so.1", "libBrokenLocale.so.1", "libc_malloc_debug.so.0", "libthread_db.so.1":
		return true
	}
	return strings.HasPrefix(soname, "ld-linux") || strings.HasPrefix(soname, "libnss_")
}

func (b *builder) entries() []Entry {
	out := make([]Entry, 0, len(b.files))
	for _, e := range b.files {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// write writes the archive: entries sorted by path, host files read now.
func (b *builder) write(w io.Writer) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	cw := initramfs.NewWriter(zw)
	for _, e := range b.entries() {
		if target, ok := b.links[e.Path]; ok {
			if err := cw.Symlink(e.Path, target); err != nil {
				return fmt.Errorf("overlay: %w", err)
			}
			continue
		}
		if d, ok := b.data[e.Path]; ok {
			if err := cw.Bytes(e.Path, 0o644, d); err != nil {
				return fmt.Errorf("overlay: %w", err)
			}
			continue
		}
		// Regular files keep their execute bits, nothing else.
		if err := cw.HostFile(e.Path, b.src[e.Path], 0o644); err != nil {
			return fmt.Errorf("overlay: %w", err)
		}
	}
	if err := cw.Close(); err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	return zw.Close()
}
