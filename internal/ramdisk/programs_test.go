package ramdisk

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/programs"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/debian"
)

// cpioEntry is one member of a newc archive.
type cpioEntry struct {
	mode uint32
	data []byte // a symbolic link's target for a link
}

// readNewc reads the members of an uncompressed newc archive.
func readNewc(b []byte) (map[string]cpioEntry, error) {
	out := map[string]cpioEntry{}
	align := func(n int) int { return (n + 3) &^ 3 }
	for off := 0; ; {
		if off+110 > len(b) || string(b[off:off+6]) != "070701" {
			return nil, fmt.Errorf("no newc header at %d", off)
		}
		field := func(i int) int {
			v, _ := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
			return int(v)
		}
		mode, size, nameSize := field(1), field(6), field(11)
		nameEnd := off + 110 + nameSize
		dataStart := align(nameEnd)
		if nameSize < 1 || dataStart+size > len(b) {
			return nil, fmt.Errorf("member at %d runs past the archive", off)
		}
		name := string(b[off+110 : nameEnd-1])
		if name == "TRAILER!!!" {
			return out, nil
		}
		out[strings.TrimPrefix(name, "./")] = cpioEntry{mode: uint32(mode), data: b[dataStart : dataStart+size]}
		off = align(dataStart + size)
	}
}

// resolve follows symbolic links in the archive from p (no leading
// slash) to a regular file, returning its path, or "".
func resolve(files map[string]cpioEntry, p string) string {
	for range 40 {
		e, ok := files[p]
		if !ok {
			return ""
		}
		if e.mode&0o170000 != 0o120000 {
			return p
		}
		p = linkTarget(p, string(e.data))
	}
	return ""
}

// checkCarried returns what an archive's files lack for the registered
// programs: a program in none of the PATH directories, an ELF file's
// loader or DT_NEEDED library in none of the loader's directories.
func checkCarried(files map[string]cpioEntry, arch Arch) []string {
	var problems []string
	for _, p := range programs.All() {
		found := false
		for _, d := range programBinDirs {
			if resolve(files, path.Join(d, p.Name)) != "" {
				found = true
				break
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("program %s (%s) is not in %s", p.Name, p.Package, strings.Join(programBinDirs, ", ")))
		}
	}
	for name, e := range files {
		if e.mode&0o170000 != 0o100000 || !bytes.HasPrefix(e.data, []byte("\x7fELF")) || strings.HasPrefix(name, "lib/modules") {
			continue
		}
		f, err := elf.NewFile(bytes.NewReader(e.data))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		if f.Machine != arch.Machine {
			problems = append(problems, fmt.Sprintf("%s is for %s, not %s", name, f.Machine, arch.Machine))
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				interp, _ := io.ReadAll(prog.Open())
				if p := strings.TrimRight(string(interp), "\x00"); resolve(files, strings.TrimPrefix(p, "/")) == "" {
					problems = append(problems, fmt.Sprintf("%s: loader %s is not in the archive", name, p))
				}
			}
		}
		libs, _ := f.ImportedLibraries()
		for _, so := range libs {
			found := false
			for _, d := range arch.libDirs() {
				if resolve(files, path.Join(d, so)) != "" {
					found = true
					break
				}
			}
			if !found {
				problems = append(problems, fmt.Sprintf("%s needs %s, which is in none of %s", name, so, strings.Join(arch.libDirs(), ", ")))
			}
		}
		f.Close()
	}
	slices.Sort(problems)
	return problems
}

// TestBuildCarriesEveryProgram builds an initramfs with the registry's
// programs from Debian's packages (FetchPrograms: downloaded once into
// the ramdisk cache) for each architecture and reads the archive back:
// every registered program must be in a PATH directory, every ELF file
// of the architecture, and its loader and DT_NEEDED libraries in the
// loader's directories. It then drops one library from the set and
// checks that the same reading notices.
func TestBuildCarriesEveryProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: downloads Debian packages on first use")
	}
	cache, err := cachedir.Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range Arches() {
		t.Run(arch.Name, func(t *testing.T) {
			set, err := FetchPrograms(t.Context(), cache, arch.Name, debian.Mirrors{}, programs.All())
			if err != nil {
				t.Fatal(err)
			}
			k, agent := fakeKernel(t), staticBinaryFor(t, arch.Name)
			k.Arch = arch.Name
			build := func(set *ProgramSet) (map[string]cpioEntry, *Result) {
				res, err := Build(t.Context(), Options{Kernel: k, Agent: agent, Programs: set, Raw: true, Modules: []string{"virtio_blk"}}, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				raw, err := os.ReadFile(res.InitramfsRaw)
				if err != nil {
					t.Fatal(err)
				}
				files, err := readNewc(raw)
				if err != nil {
					t.Fatal(err)
				}
				return files, res
			}
			files, res := build(set)
			for _, p := range checkCarried(files, arch) {
				t.Error(p)
			}
			for _, s := range res.Sizes {
				if strings.HasPrefix(s.Item, "program") {
					t.Logf("%-60s %3d files %8.2f MiB unpacked %6.2f MiB gzip", s.Item, s.Files, float64(s.Bytes)/(1<<20), float64(s.Gzip)/(1<<20))
				}
			}
			if len(res.Programs) != len(set.Files) {
				t.Errorf("report lists %d program files, the set has %d", len(res.Programs), len(set.Files))
			}

			// The check itself: without libc, every program's loader and libc
			// go missing.
			short := &ProgramSet{Arch: set.Arch, Packages: set.Packages}
			for _, f := range set.Files {
				if !strings.Contains(f.Path, "libc.so.6") {
					short.Files = append(short.Files, f)
				}
			}
			files, _ = build(short)
			problems := checkCarried(files, arch)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "needs libc.so.6") }) {
				t.Errorf("an archive without libc.so.6 passed the check: %q", problems)
			}
			// Another architecture's programs are refused.
			other := *set
			other.Arch = "amd64"
			if arch.Name == "amd64" {
				other.Arch = "arm64"
			}
			if _, err := Build(t.Context(), Options{Kernel: k, Agent: agent, Programs: &other, Modules: []string{"virtio_blk"}}, t.TempDir()); err == nil || !strings.Contains(err.Error(), "the programs are "+other.Arch+"'s") {
				t.Errorf("programs of %s in an %s ramdisk: %v", other.Arch, arch.Name, err)
			}
		})
	}
}

// planPrograms over a made-up package tree with the host's own ELF files:
// a program whose name is a hard link, one that is a symbolic link, the
// loader through an absolute symbolic link in another package, an alias,
// and a library no package has, which comes back unresolved.
func TestPlanPrograms(t *testing.T) {
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	bin, err := exec.LookPath("true")
	if err != nil {
		t.Skip("SKIPPED: no true(1) on the host")
	}
	ld, err := os.ReadFile("/lib64/ld-linux-x86-64.so.2")
	if err != nil {
		t.Skipf("SKIPPED: not an amd64 glibc host: %v", err)
	}
	libcData, err := os.ReadFile(libc)
	if err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	binData, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	amd64, err := LookupArch("amd64")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	write := func(p string, b []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	symlink := func(target, p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	tools := FirmwarePackage{Name: "tools", Dir: filepath.Join(root, "tools")}
	write(filepath.Join(tools.Dir, "sbin/mke2fs"), binData)
	if err := os.Link(filepath.Join(tools.Dir, "sbin/mke2fs"), filepath.Join(tools.Dir, "sbin/mkfs.ext4")); err != nil {
		t.Fatal(err)
	}
	symlink("mke2fs", filepath.Join(tools.Dir, "sbin/mkfs.ext3"))
	c := FirmwarePackage{Name: "libc6", Dir: filepath.Join(root, "libc6")}
	write(filepath.Join(c.Dir, "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"), ld)
	symlink("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", filepath.Join(c.Dir, "lib64/ld-linux-x86-64.so.2"))
	progs := []programs.Program{{Name: "mkfs.ext3", Package: "tools", Aliases: []string{"mkfs3"}}, {Name: "mkfs.ext4", Package: "tools"}}

	// Without libc.so.6: unresolved, named with who needs it.
	_, unresolved, err := planPrograms(amd64, progs, []FirmwarePackage{tools, c})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(unresolved, func(u unresolvedLib) bool { return u.soname == "libc.so.6" && u.pkg == "tools" }) {
		t.Errorf("libc.so.6 not reported missing: %+v", unresolved)
	}

	write(filepath.Join(c.Dir, "lib/x86_64-linux-gnu/libc.so.6"), libcData)
	files, unresolved, err := planPrograms(amd64, progs, []FirmwarePackage{tools, c})
	if err != nil || len(unresolved) > 0 {
		t.Fatalf("err %v, unresolved %+v", err, unresolved)
	}
	got := map[string]string{}
	for _, f := range files {
		got[f.Path] = f.Link + " " + f.Package + " " + strings.Join(f.Programs, ",")
	}
	want := map[string]string{
		"sbin/mkfs.ext3":             "mke2fs tools mkfs.ext3",
		"bin/mkfs3":                  "/sbin/mkfs.ext3 tools mkfs.ext3", // an alias: in /bin, absolute
		"sbin/mke2fs":                " tools mkfs.ext3,mkfs.ext4",
		"sbin/mkfs.ext4":             "/sbin/mke2fs tools mkfs.ext4",
		"lib64/ld-linux-x86-64.so.2": "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 libc6 mkfs.ext3,mkfs.ext4",
		"lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": " libc6 mkfs.ext3,mkfs.ext4",
		"lib/x86_64-linux-gnu/libc.so.6":            " libc6 mkfs.ext3,mkfs.ext4",
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: got %q, want %q", p, got[p], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("files %v, want %v", got, want)
	}

	// A program its package does not ship fails.
	if _, _, err := planPrograms(amd64, []programs.Program{{Name: "mkfs.xfs", Package: "tools"}}, []FirmwarePackage{tools, c}); err == nil || !strings.Contains(err.Error(), "ships no mkfs.xfs") {
		t.Errorf("got %v", err)
	}
	// Debian 13's libc6 (merged /usr) ships the loader below /usr only:
	// the archive gets /lib64/... as a link to it.
	merged := FirmwarePackage{Name: "libc6", Dir: filepath.Join(root, "libc6-merged")}
	write(filepath.Join(merged.Dir, "usr/lib64/ld-linux-x86-64.so.2"), ld)
	write(filepath.Join(merged.Dir, "usr/lib/x86_64-linux-gnu/libc.so.6"), libcData)
	files, unresolved, err = planPrograms(amd64, progs[:1], []FirmwarePackage{tools, merged})
	if err != nil || len(unresolved) > 0 {
		t.Fatalf("merged /usr: err %v, unresolved %+v", err, unresolved)
	}
	got = map[string]string{}
	for _, f := range files {
		got[f.Path] = f.Link + " " + f.Package
	}
	if got["lib64/ld-linux-x86-64.so.2"] != "/usr/lib64/ld-linux-x86-64.so.2 libc6" || got["usr/lib64/ld-linux-x86-64.so.2"] != " libc6" {
		t.Errorf("merged /usr loader: %v", got)
	}
	// An arm64 set with the host's x86 programs in it fails, naming the
	// file and both machines.
	arm64, err := LookupArch("arm64")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := planPrograms(arm64, progs[:1], []FirmwarePackage{tools, merged}); err == nil || !strings.Contains(err.Error(), "EM_X86_64, not arm64") {
		t.Errorf("x86 program in an arm64 set: %v", err)
	}
}
