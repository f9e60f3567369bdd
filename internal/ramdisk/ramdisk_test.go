package ramdisk

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/debian"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod/kmodtest"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// fakeKernel is a kernel tree with stand-in modules for DefaultModules
// (their real dependencies do not matter here) plus one dependency.
func fakeKernel(t *testing.T) *Kernel {
	t.Helper()
	dir := t.TempDir()
	k := &Kernel{Package: "linux-image-test", Version: "6.1.0-test", Vmlinuz: filepath.Join(dir, "vmlinuz"),
		ModulesDir: filepath.Join(dir, "lib/modules/6.1.0-test")}
	if err := os.WriteFile(k.Vmlinuz, []byte("bzImage stand-in"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range DefaultModules() {
		kv := []string{"license=GPL"}
		if m == "sd_mod" {
			kv = append(kv, "depends=scsi_common")
		}
		p := filepath.Join(k.ModulesDir, "kernel", m+".ko")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, kmodtest.Module(kv...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(k.ModulesDir, "kernel/scsi_common.ko"), kmodtest.Module("license=GPL"), 0o644); err != nil {
		t.Fatal(err)
	}
	// One module below each subtree the manifest takes.
	for i, d := range manifestDirs() {
		p := filepath.Join(k.ModulesDir, d, fmt.Sprintf("subtree%d.ko", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, kmodtest.Module("license=GPL"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// manifestDirs are the subtrees modules.txt takes.
func manifestDirs() []string {
	var out []string
	for _, e := range Manifest() {
		if e.Dir != "" {
			out = append(out, e.Dir)
		}
	}
	return out
}

// staticBinary builds a tiny static program to stand in for the agent.
func staticBinary(t *testing.T) string {
	t.Helper()
	return staticBinaryFor(t, DefaultArch)
}

// staticBinaryFor is staticBinary cross-built for arch.
func staticBinaryFor(t *testing.T, arch string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "agent")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

func TestBuild(t *testing.T) {
	k := fakeKernel(t)
	agent := staticBinary(t)
	out := t.TempDir()
	res, err := Build(context.Background(), Options{Kernel: k, Agent: agent}, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Modules) != len(DefaultModules())+1+len(manifestDirs()) {
		t.Errorf("modules: %v", res.Modules)
	}
	raw := gunzipFile(t, res.Initramfs)
	if int64(len(raw)) != res.Uncompressed {
		t.Errorf("Uncompressed = %d, archive is %d bytes", res.Uncompressed, len(raw))
	}
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("SKIPPED (listing only): needs cpio (in test.sh)")
	}
	cmd := exec.Command("cpio", "-itv", "--quiet")
	cmd.Stdin = bytes.NewReader(raw)
	list, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio: %v\n%s", err, list)
	}
	for _, want := range []string{" init -> usr/bin/ironic-agent\n", " usr/bin/ironic-agent\n", " dev/console\n",
		" etc/ironic-agent/modules\n", " lib/modules/6.1.0-test/kernel/virtio_blk.ko\n", " lib/modules/6.1.0-test/kernel/scsi_common.ko\n"} {
		if !strings.Contains(string(list), want) {
			t.Errorf("initramfs lacks %q:\n%s", want, list)
		}
	}
	// The module list names scsi_common before sd_mod.
	cmd = exec.Command("cpio", "-i", "--quiet", "--to-stdout", "etc/ironic-agent/modules")
	cmd.Stdin = bytes.NewReader(raw)
	ml, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if i, j := strings.Index(string(ml), "/scsi_common.ko"), strings.Index(string(ml), "/sd_mod.ko"); i < 0 || j < 0 || i > j {
		t.Errorf("module list order:\n%s", ml)
	}
}

// TestBuildArm64: an arm64 kernel takes an arm64 agent and the
// manifest's arm64 lines (not the amd64 ones), and ships the kernel
// gzip-compressed; an amd64 agent is refused naming both machines.
func TestBuildArm64(t *testing.T) {
	k := fakeKernel(t)
	k.Arch = "arm64"
	for _, m := range []string{"hns3", "nicvf"} {
		if err := os.WriteFile(filepath.Join(k.ModulesDir, "kernel", m+".ko"), kmodtest.Module("license=GPL"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The manifest's arm64 lines that the fake kernel lacks are what the
	// build must refuse, naming them; isci (amd64 only) is not asked for.
	_, err := Build(t.Context(), Options{Kernel: k, Agent: staticBinaryFor(t, "arm64")}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "hisi_sas_v3_hw") || strings.Contains(err.Error(), "isci") {
		t.Fatalf("arm64 manifest against a kernel without its SoC modules: %v", err)
	}
	man := []ManifestEntry{{Name: "virtio_blk", Group: "storage"}, {Name: "hns3", Group: "nic", Arch: "arm64"},
		{Name: "isci", Group: "storage", Arch: "amd64"}, {Name: "nicvf", Group: "nic", Arch: "arm64"}}
	res, err := Build(t.Context(), Options{Kernel: k, Agent: staticBinaryFor(t, "arm64"), Manifest: man}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range res.Modules {
		names = append(names, m.Name)
	}
	if !slices.Equal(names, []string{"virtio_blk", "hns3", "nicvf"}) {
		t.Errorf("arm64 modules %v, want virtio_blk, hns3, nicvf", names)
	}
	if b := gunzipFile(t, res.Kernel); string(b) != "bzImage stand-in" {
		t.Errorf("kernel: %q, want the image gzip'ed", b)
	}
	_, err = Build(t.Context(), Options{Kernel: k, Agent: staticBinary(t), Manifest: man}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "EM_X86_64, not arm64") {
		t.Errorf("amd64 agent in an arm64 ramdisk: %v", err)
	}
	k.Arch = "sparc"
	if _, err := Build(t.Context(), Options{Kernel: k, Agent: staticBinary(t)}, t.TempDir()); err == nil || !strings.Contains(err.Error(), `unknown architecture "sparc"`) {
		t.Errorf("unknown architecture: %v", err)
	}
}

func TestBuildRefusesDynamicAgent(t *testing.T) {
	k := fakeKernel(t)
	// /bin/sh is dynamically linked on Debian.
	_, err := Build(context.Background(), Options{Kernel: k, Agent: "/bin/sh"}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("dynamic agent: %v", err)
	}
	_, err = Build(context.Background(), Options{Kernel: k, Agent: staticBinary(t), Modules: []string{"nosuch"}}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "module nosuch not found") {
		t.Errorf("unknown module: %v", err)
	}
}

// TestISO builds the virtual-media ISO with grub-mkrescue and checks it
// carries the kernel, the initramfs and a boot entry with the parameters.
func TestISO(t *testing.T) {
	for _, p := range []string{"grub-mkrescue", "xorriso"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (grub-common, grub-pc-bin, grub-efi-amd64-bin, xorriso, mtools; in test.sh)", p)
		}
	}
	dir := t.TempDir()
	kernel, initrd := filepath.Join(dir, "k"), filepath.Join(dir, "i")
	os.WriteFile(kernel, []byte("kernel"), 0o644)
	os.WriteFile(initrd, []byte("initrd"), 0o644)
	iso := filepath.Join(dir, "x.iso")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := ISO(ctx, kernel, initrd, "ipa-api-url=http://192.0.2.1:6385", iso); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "grub.cfg")
	out, err := exec.Command("xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/boot/grub/grub.cfg", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(cfg)
	if !strings.Contains(string(b), "linux /boot/"+KernelName+" console=tty0 console=ttyS0,115200 boot_method=vmedia ipa-api-url=http://192.0.2.1:6385") ||
		!strings.Contains(string(b), "initrd /boot/"+InitramfsName) {
		t.Errorf("grub.cfg:\n%s", b)
	}
	out, err = exec.Command("xorriso", "-indev", iso, "-find", "/boot", "-name", "ironic-agent.*").CombinedOutput()
	if err != nil || !strings.Contains(string(out), KernelName) || !strings.Contains(string(out), InitramfsName) {
		t.Errorf("ISO contents: %v\n%s", err, out)
	}
}

// TestBuildCompressedModules: a kernel package with .ko.xz and .ko.zst
// modules (Debian trixie's) gives an initramfs with the plain .ko files,
// byte for byte, and a module list naming them.
func TestBuildCompressedModules(t *testing.T) {
	k := fakeKernel(t)
	plain := map[string][]byte{}
	for name, ext := range map[string]string{"virtio_blk": ".xz", "scsi_common": ".zst"} {
		p := filepath.Join(k.ModulesDir, "kernel", name+".ko")
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		plain[name] = data
		var z bytes.Buffer
		var w io.WriteCloser
		if ext == ".xz" {
			w, err = xz.NewWriter(&z)
		} else {
			w, err = zstd.NewWriter(&z)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p+ext, z.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Build(context.Background(), Options{Kernel: k, Agent: staticBinary(t)}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("SKIPPED: needs cpio (in test.sh)")
	}
	dir := t.TempDir()
	f, err := os.Open(res.Initramfs)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	// Only the modules and their list: the archive's device nodes
	// (dev/console) need root to extract, and this test runs as any user.
	cmd := exec.Command("cpio", "-id", "--quiet", "lib/modules/*", ModuleListPath)
	cmd.Dir = dir
	cmd.Stdin = zr
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio: %v\n%s", err, out)
	}
	for name, want := range plain {
		got, err := os.ReadFile(filepath.Join(dir, "lib/modules/6.1.0-test/kernel", name+".ko"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s.ko in the initramfs differs from the decompressed module", name)
		}
	}
	list, err := os.ReadFile(filepath.Join(dir, ModuleListPath))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(list), "/kernel/virtio_blk.ko\t") || strings.Contains(string(list), ".ko.") {
		t.Errorf("module list:\n%s", list)
	}
}

func TestReleaseInfo(t *testing.T) {
	k := &Kernel{Flavour: "trixie", Package: "linux-image-6.12.1-amd64", Version: "6.12.1-amd64",
		Debs: []debian.Package{{Name: "linux-image-6.12.1-amd64", Version: "1:6.12.1-1"}}}
	got := string(ReleaseInfo{Version: "0.2.0", Build: "0.2.0+gabc", Commit: "abc", Date: time.Unix(1700000000, 0), Kernel: k}.Format())
	want := `NAME="ironic-agent"
ID="ironic-agent"
VERSION_ID="0.2.0"
BUILD_ID="0.2.0+gabc"
IRONIC_AGENT_VERSION="0.2.0"
IRONIC_AGENT_COMMIT="abc"
IRONIC_AGENT_BUILD_DATE="2023-11-14T22:13:20Z"
KERNEL_FLAVOUR="trixie"
KERNEL_RELEASE="6.12.1-amd64"
KERNEL_PACKAGE="linux-image-6.12.1-amd64"
KERNEL_PACKAGE_VERSION="1:6.12.1-1"
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
