package ramdisk

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/ironic-go/ironic-agent/internal/programs"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/debian"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/initramfs"
)

// ProgramSet is what the ramdisk carries for the program registry
// (internal/programs): each program from its Debian package, the shared
// libraries its ELF files need and the dynamic loader, found by
// FetchPrograms.
type ProgramSet struct {
	// Arch is the architecture of the packages (Arches).
	Arch string
	// Packages are every package the files come from: the programs' own
	// and the library packages their dependencies led to.
	Packages []FirmwarePackage
	Files    []ProgramFile
}

// ProgramFile is one file of a ProgramSet.
type ProgramFile struct {
	Path    string // in the archive, without a leading slash
	Host    string `json:"-"`          // the extracted file ("" for a symbolic link)
	Link    string `json:",omitempty"` // a symbolic link's target
	Package string
	Size    int64
	// Programs are the registered programs that need the file.
	Programs []string
}

// programBinDirs are where Debian packages put programs, in the order the
// ramdisk's PATH searches them (internal/ramdisk/rdinit gives the agent
// /usr/sbin:/usr/bin:/sbin:/bin).
var programBinDirs = []string{"usr/sbin", "usr/bin", "sbin", "bin"}

// programSuites are the suites the programs come from whatever the
// kernel flavour: Debian's stable release (DefaultKernelFlavour's), with
// its updates and security updates.
func programSuites() []string {
	f, _ := LookupKernelFlavour(DefaultKernelFlavour)
	return f.Suites
}

// FetchPrograms downloads the Debian packages of progs for architecture
// arch ("": DefaultArch; component main of Debian's stable release,
// programSuites, on mirrors m, with the Debian archive client; extracted
// below cacheDir/programs) and works out the files the ramdisk needs:
// each program at the path its package ships it, and the closure of the
// ELF files' DT_NEEDED libraries and PT_INTERP loader. A library none of
// the packages fetched so far ships is looked for in the library
// dependencies (Depends and Pre-Depends named lib* or zlib*) of the
// package whose file needs it, fetched in turn; one that none of them
// ships fails the build, naming it.
//
// The packages, not the build host's files: the host need not have the
// programs installed, and the ramdisk then holds the archive's current
// versions whatever the host has, like the kernel and firmware.
func FetchPrograms(ctx context.Context, cacheDir, arch string, m debian.Mirrors, progs []programs.Program) (*ProgramSet, error) {
	base := filepath.Join(cacheDir, "programs")
	a, err := LookupArch(arch)
	if err != nil {
		return nil, err
	}
	c, err := archiveClient(cacheDir, a.Name, m)
	if err != nil {
		return nil, err
	}
	ix, err := c.Packages(ctx, programSuites(), []string{"main"})
	if err != nil {
		return nil, fmt.Errorf("ramdisk: programs: %w", err)
	}
	var want []string
	for _, p := range progs {
		if !slices.Contains(want, p.Package) {
			want = append(want, p.Package)
		}
	}
	var pkgs []FirmwarePackage
	for round := 0; len(want) > 0; round++ {
		if round > 10 {
			return nil, fmt.Errorf("ramdisk: programs: library dependencies deeper than 10 packages: %s", strings.Join(want, ", "))
		}
		got, err := fetchPackages(ctx, c, ix, base, want)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, got...)
		files, unresolved, err := planPrograms(a, progs, pkgs)
		if err != nil {
			return nil, err
		}
		if len(unresolved) == 0 {
			return &ProgramSet{Arch: a.Name, Packages: pkgs, Files: files}, nil
		}
		want = want[:0]
		var needs []string
		for _, u := range unresolved {
			needs = append(needs, fmt.Sprintf("%s (for %s of %s)", u.soname, u.by, u.pkg))
			i := slices.IndexFunc(pkgs, func(p FirmwarePackage) bool { return p.Name == u.pkg })
			deps, err := debDepends(pkgs[i].Deb)
			if err != nil {
				return nil, err
			}
			for _, d := range deps {
				if (strings.HasPrefix(d, "lib") || strings.HasPrefix(d, "zlib")) && !slices.Contains(want, d) &&
					!slices.ContainsFunc(pkgs, func(p FirmwarePackage) bool { return p.Name == d }) {
					want = append(want, d)
				}
			}
		}
		if len(want) == 0 {
			return nil, fmt.Errorf("ramdisk: programs: no package of the library dependencies ships %s", strings.Join(needs, ", "))
		}
	}
	return nil, errors.New("ramdisk: programs: no packages")
}

// debDepends returns the packages deb depends on (Depends and
// Pre-Depends of its control file; the first of alternatives, without
// versions or architecture qualifiers).
func debDepends(deb string) ([]string, error) {
	st, err := debian.Control(deb)
	if err != nil {
		return nil, fmt.Errorf("ramdisk: programs: %w", err)
	}
	return debian.ParseDepends(st.Get("Depends") + "," + st.Get("Pre-Depends")), nil
}

// unresolvedLib is a library an ELF file needs that no package has.
type unresolvedLib struct{ soname, by, pkg string }

// planPrograms finds, in the extracted packages pkgs of architecture
// arch, each program of progs in its own package and the closure of what
// its ELF files need. It fails when a program is not in its package or
// an ELF file is for another architecture; libraries none of pkgs ship
// are returned.
func planPrograms(arch Arch, progs []programs.Program, pkgs []FirmwarePackage) ([]ProgramFile, []unresolvedLib, error) {
	c := &programCollector{arch: arch, pkgs: pkgs, byPath: map[string]*ProgramFile{}, inodes: map[[2]uint64]string{}}
	for _, p := range progs {
		i := slices.IndexFunc(pkgs, func(f FirmwarePackage) bool { return f.Name == p.Package })
		if i < 0 {
			return nil, nil, fmt.Errorf("ramdisk: programs: package %s of %s was not fetched", p.Package, p.Name)
		}
		found := false
		for _, d := range programBinDirs {
			rel := path.Join(d, p.Name)
			if _, err := os.Lstat(filepath.Join(pkgs[i].Dir, rel)); err == nil {
				if err := c.add(pkgs[i], rel, p.Name); err != nil {
					return nil, nil, err
				}
				// In /bin, where a #! line names them, wherever the
				// package put the program.
				for _, alias := range p.Aliases {
					c.put(ProgramFile{Path: path.Join("bin", alias), Link: "/" + rel, Package: pkgs[i].Name, Programs: []string{p.Name}})
				}
				found = true
				break
			}
		}
		if !found {
			return nil, nil, fmt.Errorf("ramdisk: programs: package %s ships no %s in %s", p.Package, p.Name, strings.Join(programBinDirs, ", "))
		}
	}
	return c.files, c.unresolved, nil
}

type programCollector struct {
	arch       Arch
	pkgs       []FirmwarePackage
	files      []ProgramFile
	byPath     map[string]*ProgramFile
	inodes     map[[2]uint64]string // (device, inode) of a regular file -> its archive path
	unresolved []unresolvedLib
}

// add carries rel (a path in pkg's tree) for prog: a symbolic link and
// its target (within the packages), or a file and, for an ELF file,
// what it needs.
func (c *programCollector) add(pkg FirmwarePackage, rel, prog string) error {
	if f, ok := c.byPath[rel]; ok {
		if !slices.Contains(f.Programs, prog) {
			f.Programs = append(f.Programs, prog)
			// What a shared file needs is shared too.
			if f.Link != "" {
				return c.add(c.pkgOf(f.Package), linkTarget(rel, f.Link), prog)
			}
			return c.markDeps(f, prog)
		}
		return nil
	}
	host := filepath.Join(pkg.Dir, rel)
	st, err := os.Lstat(host)
	if err != nil {
		return fmt.Errorf("ramdisk: programs: %w", err)
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(host)
		if err != nil {
			return fmt.Errorf("ramdisk: programs: %w", err)
		}
		c.put(ProgramFile{Path: rel, Link: target, Package: pkg.Name, Programs: []string{prog}})
		to := linkTarget(rel, target)
		if !filepath.IsLocal(to) {
			return fmt.Errorf("ramdisk: programs: %s of %s points outside the tree (%s)", rel, pkg.Name, target)
		}
		owner := pkg
		if _, err := os.Lstat(filepath.Join(pkg.Dir, to)); err != nil {
			i := slices.IndexFunc(c.pkgs, func(p FirmwarePackage) bool { return fileExistsL(filepath.Join(p.Dir, to)) })
			if i < 0 {
				return fmt.Errorf("ramdisk: programs: %s of %s points at %s, which no package fetched ships", rel, pkg.Name, target)
			}
			owner = c.pkgs[i]
		}
		return c.add(owner, to, prog)
	case st.Mode().IsRegular():
		// debian.Extract extracts hard links as such (mkfs.ext4 is mke2fs): one
		// copy, the other names link to it.
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			ino := [2]uint64{uint64(sys.Dev), sys.Ino}
			if first, ok := c.inodes[ino]; ok {
				c.put(ProgramFile{Path: rel, Link: "/" + first, Package: pkg.Name, Programs: []string{prog}})
				return c.add(pkg, first, prog)
			}
			c.inodes[ino] = rel
		}
		f := c.put(ProgramFile{Path: rel, Host: host, Package: pkg.Name, Size: st.Size(), Programs: []string{prog}})
		return c.markDeps(f, prog)
	default:
		return fmt.Errorf("ramdisk: programs: %s of %s is neither a file nor a symbolic link", rel, pkg.Name)
	}
}

func (c *programCollector) put(f ProgramFile) *ProgramFile {
	c.files = append(c.files, f)
	// Pointers into c.files move when it grows: index by path anew.
	for i := range c.files {
		c.byPath[c.files[i].Path] = &c.files[i]
	}
	return c.byPath[f.Path]
}

func (c *programCollector) pkgOf(name string) FirmwarePackage {
	i := slices.IndexFunc(c.pkgs, func(p FirmwarePackage) bool { return p.Name == name })
	return c.pkgs[i]
}

// markDeps adds what the ELF file f needs (nothing for another file).
func (c *programCollector) markDeps(f *ProgramFile, prog string) error {
	interp, needed, err := c.elfNeeds(f.Host)
	if err != nil {
		return fmt.Errorf("ramdisk: programs: %s of %s: %w", f.Path, f.Package, err)
	}
	fpath, pkgName := f.Path, f.Package // f may move as files are added
	if interp != "" {
		rel := strings.TrimPrefix(path.Clean(interp), "/")
		find := func(rel string) int {
			return slices.IndexFunc(c.pkgs, func(p FirmwarePackage) bool { return fileExistsL(filepath.Join(p.Dir, rel)) })
		}
		i := find(rel)
		if i < 0 {
			// Debian 13's libc6 ships the loader below /usr only (merged
			// /usr: base-files makes /lib64 a link to usr/lib64), while
			// the programs still name /lib64/...: carry a link to it.
			if j := find("usr/" + rel); j >= 0 {
				if _, ok := c.byPath[rel]; !ok {
					c.put(ProgramFile{Path: rel, Link: "/usr/" + rel, Package: c.pkgs[j].Name, Programs: []string{prog}})
				}
				rel, i = "usr/"+rel, j
			}
		}
		if i < 0 {
			c.unresolved = append(c.unresolved, unresolvedLib{soname: interp, by: fpath, pkg: pkgName})
		} else if err := c.add(c.pkgs[i], rel, prog); err != nil {
			return err
		}
	}
	for _, so := range needed {
		found := false
		for _, p := range c.pkgs {
			for _, d := range c.arch.libDirs() {
				rel := path.Clean(d + "/" + so)
				if fileExistsL(filepath.Join(p.Dir, rel)) {
					if err := c.add(p, rel, prog); err != nil {
						return err
					}
					found = true
					break
				}
			}
			if found {
				break
			}
		}
		if !found && !slices.ContainsFunc(c.unresolved, func(u unresolvedLib) bool { return u.soname == so && u.pkg == pkgName }) {
			c.unresolved = append(c.unresolved, unresolvedLib{soname: so, by: fpath, pkg: pkgName})
		}
	}
	return nil
}

// linkTarget is the archive path a symbolic link at rel with target
// points at.
func linkTarget(rel, target string) string {
	if path.IsAbs(target) {
		return strings.TrimPrefix(path.Clean(target), "/")
	}
	return path.Join(path.Dir(rel), target)
}

func fileExistsL(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// ELFNeeds returns an ELF file's loader (PT_INTERP) and DT_NEEDED
// libraries; a file that is not ELF (a script, a data file) needs nothing.
func ELFNeeds(p string) (interp string, needed []string, err error) {
	return elfNeeds(p, nil)
}

// elfNeeds is ELFNeeds of a file of c's architecture: one of another
// machine fails.
func (c *programCollector) elfNeeds(p string) (string, []string, error) {
	return elfNeeds(p, &c.arch)
}

func elfNeeds(p string, arch *Arch) (interp string, needed []string, err error) {
	f, err := elf.Open(p)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return "", nil, nil
		}
		return "", nil, err
	}
	defer f.Close()
	if arch != nil {
		if err := arch.checkELF(p, f); err != nil {
			return "", nil, err
		}
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err != nil {
				return "", nil, fmt.Errorf("PT_INTERP: %w", err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	needed, err = f.ImportedLibraries()
	if err != nil {
		return "", nil, fmt.Errorf("DT_NEEDED: %w", err)
	}
	return interp, needed, nil
}

// addPrograms writes set's files into the initramfs, as one size-report
// piece per package of programs (the programs and the libraries only they
// need) and one for the libraries programs of several packages share.
func addPrograms(w *initramfs.Writer, piece func(string, int, func() error) error, set *ProgramSet, rep *Report) error {
	if set == nil {
		return nil
	}
	pkgOf := map[string]string{}
	for _, p := range programs.All() {
		pkgOf[p.Name] = p.Package
	}
	group := func(f ProgramFile) string {
		var ps []string
		for _, prog := range f.Programs {
			if pk := pkgOf[prog]; !slices.Contains(ps, pk) {
				ps = append(ps, pk)
			}
		}
		if len(ps) == 1 {
			var names []string
			for n, pk := range pkgOf {
				if pk == ps[0] {
					names = append(names, n)
				}
			}
			slices.Sort(names)
			return fmt.Sprintf("programs %s (%s)", ps[0], strings.Join(names, ", "))
		}
		return "program libraries (shared; libc6, ...)"
	}
	var groups []string
	byGroup := map[string][]ProgramFile{}
	for _, f := range set.Files {
		g := group(f)
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], f)
	}
	// The shared libraries first, then the packages in registry order.
	slices.SortStableFunc(groups, func(a, b string) int {
		return boolInt(!strings.HasPrefix(a, "program libraries")) - boolInt(!strings.HasPrefix(b, "program libraries"))
	})
	for _, g := range groups {
		files := byGroup[g]
		err := piece(g, len(files), func() error {
			for _, f := range files {
				if f.Link != "" {
					if err := w.Symlink(f.Path, f.Link); err != nil {
						return fmt.Errorf("ramdisk: programs: %w", err)
					}
					continue
				}
				if err := addFile(w, f.Path, f.Host, 0o644); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	rep.Programs = set.Files
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
