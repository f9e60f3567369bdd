package overlay

import (
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/initramfs"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod/kmodtest"
)

const release = "6.12.99-test-amd64"

// base writes a stand-in for the ramdisk's initramfs: its kernel's module
// directory and the C library, which a program of the overlay then needs
// not bring.
func base(t *testing.T) string {
	t.Helper()
	return baseWith(t, "x86_64-linux-gnu")
}

// baseWith is base with the libraries in lib/<multiarch>.
func baseWith(t *testing.T, multiarch string) string {
	t.Helper()
	return baseOf(t, multiarch, release)
}

// baseOf is a stand-in for the initramfs of a ramdisk running kernel rel,
// with its libraries in lib/<multiarch> and, besides sd_mod and libphy,
// modules of the names in more.
func baseOf(t *testing.T, multiarch, rel string, more ...string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	w := initramfs.NewWriter(zw)
	loader := map[string]string{"x86_64-linux-gnu": "lib64/ld-linux-x86-64.so.2", "aarch64-linux-gnu": "lib/ld-linux-aarch64.so.1"}[multiarch]
	files := []string{"lib/modules/" + rel + "/kernel/drivers/scsi/sd_mod.ko", "lib/modules/" + rel + "/kernel/drivers/net/phy/libphy.ko.xz", "lib/" + multiarch + "/libc.so.6", loader, "usr/bin/ironic-agent"}
	for _, m := range more {
		files = append(files, "lib/modules/"+rel+"/kernel/"+m+".ko.xz")
	}
	for _, f := range files {
		if err := w.Bytes(f, 0o644, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "ironic-agent.initramfs")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func write(t *testing.T, p string, b []byte, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, archive []byte) []string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	names, err := initramfs.ReadNames(zr)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestBuild: configuration, a tree with a step, firmware, a module for
// the ramdisk's kernel with its list line, and a host program (the C
// library and its loader are the ramdisk's already).
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	conf := write(t, filepath.Join(dir, "site.conf"), []byte("[DEFAULT]\ndebug = true\n"), 0o644)
	tree := filepath.Join(dir, "tree")
	write(t, filepath.Join(tree, "etc/ironic-agent/steps.d/site_step"), []byte("#!/bin/sh\necho ok\n"), 0o755)
	write(t, filepath.Join(tree, "etc/ironic-agent/steps.d/site_step.json"), []byte(`{"priority": 0}`), 0o644)
	fw := write(t, filepath.Join(dir, "fw.bin"), []byte("firmware"), 0o644)
	ko := write(t, filepath.Join(dir, "acme_nic.ko"), kmodtest.Module("vermagic="+release+" SMP preempt mod_unload modversions ",
		"alias=pci:v00001234d00005678sv*sd*bc*sc*i*", "depends=libphy"), 0o644)
	prog, err := os.Executable() // a dynamically or statically linked ELF file of this host
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	// kmodtest's modules carry no signature (TestBuildModuleSignatures
	// packs Debian's signed ones).
	entries, err := Build(Spec{Base: base(t), Files: []string{"etc/ironic-python-agent.d/site.conf=" + conf}, Dirs: []string{tree},
		Firmware: []string{"acme/nic.bin=" + fw}, Modules: []string{ko}, Programs: []string{prog + "=usr/local/bin/tool"}, AllowUnsignedModules: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	names := read(t, out.Bytes())
	for _, want := range []string{"etc/ironic-python-agent.d/site.conf", "etc/ironic-agent/steps.d/site_step", "etc/ironic-agent/steps.d/site_step.json",
		"lib/firmware/acme/nic.bin", "lib/modules/" + release + "/updates/acme_nic.ko", ListPath, "usr/local/bin/tool"} {
		if !slices.Contains(names, want) {
			t.Errorf("the overlay lacks %s: %v", want, names)
		}
	}
	if slices.Contains(names, "lib/x86_64-linux-gnu/libc.so.6") {
		t.Errorf("the overlay copies the C library the ramdisk has")
	}
	var list string
	for _, e := range entries {
		if e.Path == ListPath {
			list = e.From
		}
	}
	if list == "" {
		t.Errorf("no module list among %v", entries)
	}
}

// TestBuildModuleSignatures packs a real signed module of Debian's kernel
// (the default flavour's, as the ramdisk's build fetches it), then the
// same module run through strip (which drops the appended signature) by
// -module and by -dir: both are refused naming the module's path in the
// overlay and Secure Boot, and packed with AllowUnsignedModules.
func TestBuildModuleSignatures(t *testing.T) {
	cache, err := cachedir.Dir()
	if err != nil {
		t.Fatal(err)
	}
	f, err := ramdisk.LookupKernelFlavour("")
	if err != nil {
		t.Fatal(err)
	}
	k, err := ramdisk.FetchKernel(t.Context(), cache, f, "")
	if err != nil {
		t.Skipf("SKIPPED: needs Debian's kernel (a mirror, or the cache the VM tests fill): %v", err)
	}
	strip, err := exec.LookPath("strip")
	if err != nil {
		t.Skip("SKIPPED: needs strip (Debian package binutils)")
	}
	tree, err := kmod.Open(k.ModulesDir)
	if err != nil {
		t.Fatal(err)
	}
	const name = "softdog"
	mods, err := tree.Resolve([]string{name})
	if err != nil {
		t.Skipf("SKIPPED: kernel %s: %v", k.Version, err)
	}
	var signed string
	var deps []string
	for _, m := range mods {
		if m.Name == name {
			signed = filepath.Join(k.ModulesDir, m.Path)
		} else {
			deps = append(deps, m.Name)
		}
	}
	rel := filepath.Base(k.ModulesDir)
	b := baseOf(t, "x86_64-linux-gnu", rel, deps...)
	if _, err := Build(Spec{Base: b, Modules: []string{signed}}, &bytes.Buffer{}); err != nil {
		t.Fatalf("Debian's signed %s: %v", name, err)
	}

	dir := t.TempDir()
	data, err := kmod.ReadModule(signed)
	if err != nil {
		t.Fatal(err)
	}
	stripped := write(t, filepath.Join(dir, name+".ko"), data, 0o644)
	if out, err := exec.Command(strip, "--strip-debug", stripped).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v: %s", err, out)
	}
	strippedData, err := os.ReadFile(stripped)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "tree", "lib/modules", rel, "extra", name+".ko"), strippedData, 0o644)
	for _, c := range []struct {
		name string
		spec Spec
		path string // in the overlay
	}{
		{"-module", Spec{Base: b, Modules: []string{stripped}}, "/lib/modules/" + rel + "/updates/" + name + ".ko"},
		{"-dir", Spec{Base: b, Dirs: []string{filepath.Join(dir, "tree")}}, "/lib/modules/" + rel + "/extra/" + name + ".ko"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(c.spec, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), "module "+c.path+" ") || !strings.Contains(err.Error(), "no appended signature") ||
				!strings.Contains(err.Error(), "Secure Boot kernel in lockdown refuses unsigned modules") {
				t.Fatalf("stripped %s: %v, want an error naming %s, its missing signature and Secure Boot", name, err, c.path)
			}
			t.Logf("%v", err)
			c.spec.AllowUnsignedModules = true
			if _, err := Build(c.spec, &bytes.Buffer{}); err != nil {
				t.Fatalf("with AllowUnsignedModules: %v", err)
			}
		})
	}
}

func TestBuildRefuses(t *testing.T) {
	dir := t.TempDir()
	ko := write(t, filepath.Join(dir, "old.ko"), kmodtest.Module("vermagic=6.1.0-18-amd64 SMP mod_unload "), 0o644)
	unsigned := write(t, filepath.Join(dir, "unsigned.ko"), kmodtest.Module("vermagic="+release+" SMP mod_unload "), 0o644)
	orphan := write(t, filepath.Join(dir, "orphan.ko"), kmodtest.Module("vermagic="+release+" SMP mod_unload ", "depends=watchdog"), 0o644)
	f := write(t, filepath.Join(dir, "a"), []byte("a"), 0o644)
	for name, c := range map[string]struct {
		spec Spec
		want string
	}{
		"a module for another kernel":  {Spec{Base: base(t), Modules: []string{ko}}, `built for kernel "6.1.0-18-amd64", and the ramdisk runs ` + release},
		"modules without the base":     {Spec{Modules: []string{ko}}, "need the ramdisk's initramfs (-base)"},
		"a dependency nobody carries":  {Spec{Base: base(t), Modules: []string{orphan}, AllowUnsignedModules: true}, "module orphan needs module watchdog, which the ramdisk does not carry"},
		"an unsigned module":           {Spec{Base: base(t), Modules: []string{unsigned}}, "module /lib/modules/" + release + "/updates/unsigned.ko (from " + unsigned + "): no appended signature"},
		"a file without a destination": {Spec{Files: []string{f}}, "want DEST=SRC"},
		"two sources for one path":     {Spec{Files: []string{"etc/x=" + f, "/etc/x=" + f}}, "/etc/x comes from both"},
		"a missing file":               {Spec{Files: []string{"etc/x=" + f + ".missing"}}, "no such file"},
		"not an initramfs":             {Spec{Base: f, Modules: []string{ko}}, "neither a newc archive nor gzip"},
		// The test binary is this host's, not the other architecture's.
		"a program of another machine": {Spec{Base: otherBase(t), Programs: []string{hostProgram(t)}}, "not " + otherArch()},
	} {
		if _, err := Build(c.spec, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

// TestBuildRefusesAnotherGlibcPart: a program needing a part of glibc the
// ramdisk lacks (awk: libm.so.6) is refused naming it, since the host's
// would be another build than the ramdisk's libc.so.6; without the
// ramdisk's C library the host's whole C library goes in.
func TestBuildRefusesAnotherGlibcPart(t *testing.T) {
	awk, err := exec.LookPath("awk")
	if err == nil {
		awk, err = filepath.EvalSymlinks(awk)
	}
	if err != nil {
		t.Skipf("SKIPPED: no awk on this host: %v", err)
	}
	if _, needed, err := ramdisk.ELFNeeds(awk); err != nil || !slices.Contains(needed, "libm.so.6") {
		t.Skipf("SKIPPED: %s does not need libm.so.6 (%v %v)", awk, needed, err)
	}
	_, err = Build(Spec{Base: base(t), Programs: []string{awk}}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "needs libm.so.6") || !strings.Contains(err.Error(), "a part of the C library") {
		t.Errorf("awk with a ramdisk without libm: %v", err)
	}
}

// hostProgram is an ELF program of this host's machine: the test binary.
func hostProgram(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// otherArch is an architecture other than the host's, and otherBase a
// base initramfs of it.
func otherArch() string {
	if runtime.GOARCH == "arm64" {
		return "amd64"
	}
	return "arm64"
}

func otherBase(t *testing.T) string {
	t.Helper()
	if otherArch() == "amd64" {
		return baseWith(t, "x86_64-linux-gnu")
	}
	return baseWith(t, "aarch64-linux-gnu")
}
