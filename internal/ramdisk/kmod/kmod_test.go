package kmod

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod/kmodtest"
)

func writeTree(t *testing.T, mods map[string][]string, builtin ...string) string {
	t.Helper()
	dir := t.TempDir()
	for path, kv := range mods {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, kmodtest.Module(kv...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var bl strings.Builder
	for _, b := range builtin {
		bl.WriteString(b + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte(bl.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func names(ms []Module) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func TestResolveOrder(t *testing.T) {
	dir := writeTree(t, map[string][]string{
		"kernel/drivers/scsi/sd_mod.ko":           {"license=GPL", "depends=scsi_common,t10-pi"},
		"kernel/drivers/scsi/scsi_common.ko":      {"depends="},
		"kernel/block/t10-pi.ko":                  {"depends=crc64_rocksoft", "softdep=pre: crc64_rocksoft_generic post: nothing"},
		"kernel/lib/crc64-rocksoft.ko":            {"depends="},
		"kernel/crypto/crc64_rocksoft_generic.ko": {"depends="},
		"kernel/drivers/nvme/host/nvme.ko":        {"depends=nvme-core"},
		"kernel/drivers/nvme/host/nvme-core.ko":   {"depends=t10-pi", "softdep=pre: missing_soft"},
	}, "kernel/drivers/ata/libahci.ko")
	tree, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tree.Resolve([]string{"sd_mod", "nvme", "libahci"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"scsi_common", "crc64_rocksoft", "crc64_rocksoft_generic", "t10_pi", "sd_mod", "nvme_core", "nvme"}
	if !reflect.DeepEqual(names(got), want) {
		t.Errorf("order = %v, want %v", names(got), want)
	}
	if got[3].Path != "kernel/block/t10-pi.ko" {
		t.Errorf("path of t10_pi = %q", got[3].Path)
	}
}

func TestResolveErrors(t *testing.T) {
	dir := writeTree(t, map[string][]string{
		"kernel/a.ko":   {"depends=b"},
		"kernel/c.ko":   {"depends=d"},
		"kernel/d.ko":   {"depends=c"}, // a cycle: placed once, no hang
		"kernel/bad.ko": {},
	})
	if err := os.WriteFile(filepath.Join(dir, "kernel/bad.ko"), []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	tree, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.Resolve([]string{"a"}); err == nil || !strings.Contains(err.Error(), "module b (needed by a) not found") {
		t.Errorf("missing dependency: %v", err)
	}
	if _, err := tree.Resolve([]string{"nosuch"}); err == nil || !strings.Contains(err.Error(), "module nosuch not found") {
		t.Errorf("missing module: %v", err)
	}
	if _, err := tree.Resolve([]string{"bad"}); err == nil || !strings.Contains(err.Error(), "bad.ko") {
		t.Errorf("garbled module: %v", err)
	}
	got, err := tree.Resolve([]string{"c"})
	if err != nil || !reflect.DeepEqual(names(got), []string{"d", "c"}) {
		t.Errorf("cycle: %v %v", names(got), err)
	}
	if _, err := Open(t.TempDir()); err == nil {
		t.Error("empty tree accepted")
	}
}

func TestParseModInfo(t *testing.T) {
	got := ParseModInfo([]byte("license=GPL\x00depends=a,b\x00\x00junk\x00=x\x00softdep=pre: c d\x00"))
	want := [][2]string{{"license", "GPL"}, {"depends", "a,b"}, {"softdep", "pre: c d"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if d := Deps(got); !reflect.DeepEqual(d, []string{"a", "b", "c", "d"}) {
		t.Errorf("deps = %v", d)
	}
}

func FuzzParseModInfo(f *testing.F) {
	f.Add([]byte("depends=a,b\x00softdep=pre: c post: d\x00"))
	f.Add([]byte("\x00\x00="))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, kv := range ParseModInfo(data) {
			if kv[0] == "" || strings.Contains(kv[0], "\x00") || strings.Contains(kv[1], "\x00") {
				t.Fatalf("bad pair %q", kv)
			}
		}
		for _, d := range Deps(ParseModInfo(data)) {
			if d == "" || strings.Contains(d, "-") {
				t.Fatalf("bad dependency %q", d)
			}
		}
	})
}

// compressors make .ko.xz, .ko.zst and .ko.gz files the way a kernel build
// does (scripts/Makefile.modinst: xz --check=crc32 --lzma2=dict=1MiB,
// zstd, gzip -n), with the real programs.
var compressors = map[string][]string{
	".xz":  {"xz", "--check=crc32", "--lzma2=dict=1MiB", "-c"},
	".zst": {"zstd", "-q", "-c"},
	".gz":  {"gzip", "-n", "-9", "-c"},
}

func compress(t *testing.T, ext string, data []byte) []byte {
	t.Helper()
	argv := compressors[ext]
	if _, err := exec.LookPath(argv[0]); err != nil {
		t.Skipf("SKIPPED: needs %s (xz-utils, zstd, gzip; in test.sh): %v", argv[0], err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, stderr.String())
	}
	return out
}

// TestCompressedModules resolves a tree whose modules are .ko.xz, .ko.zst
// and .ko.gz (Debian's trixie kernels ship .ko.xz): names, dependencies
// and aliases come out as from plain modules, and ReadModule returns the
// exact plain bytes.
func TestCompressedModules(t *testing.T) {
	plain := map[string][]byte{
		"kernel/drivers/scsi/sd_mod":      kmodtest.Module("license=GPL", "depends=scsi_common", "alias=scsi:t-0x00*"),
		"kernel/drivers/scsi/scsi_common": kmodtest.Module("license=GPL"),
		"kernel/drivers/block/virtio_blk": kmodtest.Module("license=GPL", "alias=virtio:d00000002v*", "firmware=vendor/a.bin", "firmware=b.fw"),
		"kernel/drivers/nvme/host/nvme":   kmodtest.Module("license=GPL", "depends=scsi_common", "alias=pci:v*d*sv*sd*bc01sc08i02*"),
	}
	exts := map[string]string{
		"kernel/drivers/scsi/sd_mod":      ".xz",
		"kernel/drivers/scsi/scsi_common": ".zst",
		"kernel/drivers/block/virtio_blk": ".gz",
		"kernel/drivers/nvme/host/nvme":   "", // a plain one in the same tree
	}
	dir := t.TempDir()
	for p, data := range plain {
		file := filepath.Join(dir, p+".ko")
		if ext := exts[p]; ext != "" {
			file += ext
			data = compress(t, ext, data)
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !tree.Has("sd-mod") || tree.Has("nosuch") || tree.Builtin("sd_mod") {
		t.Errorf("Has(sd-mod) %v, Has(nosuch) %v, Builtin(sd_mod) %v: want true, false, false",
			tree.Has("sd-mod"), tree.Has("nosuch"), tree.Builtin("sd_mod"))
	}
	got, err := tree.Resolve([]string{"sd_mod", "virtio_blk", "nvme"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"scsi_common", "sd_mod", "virtio_blk", "nvme"}; !reflect.DeepEqual(names(got), want) {
		t.Errorf("order = %v, want %v", names(got), want)
	}
	for _, m := range got {
		if m.Name == "sd_mod" && (!reflect.DeepEqual(m.Deps, []string{"scsi_common"}) || !reflect.DeepEqual(m.Aliases, []string{"scsi:t-0x00*"})) {
			t.Errorf("sd_mod from .ko.xz: deps %v aliases %v", m.Deps, m.Aliases)
		}
		if m.Name == "virtio_blk" && !reflect.DeepEqual(m.Firmware, []string{"vendor/a.bin", "b.fw"}) {
			t.Errorf("virtio_blk from .ko.gz: firmware %q, want its two firmware= entries", m.Firmware)
		}
		data, err := ReadModule(filepath.Join(dir, m.Path))
		if err != nil {
			t.Fatal(err)
		}
		stem := strings.TrimSuffix(PlainPath(m.Path), ".ko")
		if !bytes.Equal(data, plain[stem]) {
			t.Errorf("%s: ReadModule gave %d bytes, not the plain module's %d", m.Path, len(data), len(plain[stem]))
		}
		if want := stem + ".ko" + exts[stem]; m.Path != want {
			t.Errorf("path %q, want %q", m.Path, want)
		}
	}
}

func TestPlainPath(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/a/virtio_blk.ko.xz":  "kernel/a/virtio_blk.ko",
		"kernel/a/virtio_blk.ko.zst": "kernel/a/virtio_blk.ko",
		"kernel/a/virtio_blk.ko.gz":  "kernel/a/virtio_blk.ko",
		"kernel/a/virtio_blk.ko":     "kernel/a/virtio_blk.ko",
		"kernel/a/notes.txt":         "kernel/a/notes.txt",
	} {
		if got := PlainPath(in); got != want {
			t.Errorf("PlainPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestReadModuleErrors: a truncated or corrupt compressed module is an
// error naming the file and the compression, never a short module.
func TestReadModuleErrors(t *testing.T) {
	mod := kmodtest.Module("license=GPL", "alias=pci:v*")
	dir := t.TempDir()
	for _, ext := range []string{".xz", ".zst", ".gz"} {
		z := compress(t, ext, mod)
		cut := filepath.Join(dir, "cut.ko"+ext)
		if err := os.WriteFile(cut, z[:len(z)-len(z)/3], 0o644); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{".xz": "xz", ".zst": "zstd", ".gz": "gzip"}[ext]
		if _, err := ReadModule(cut); err == nil || !strings.Contains(err.Error(), "cut.ko"+ext) || !strings.Contains(err.Error(), want) {
			t.Errorf("truncated %s: %v", ext, err)
		}
		if _, err := ModInfo(cut); err == nil {
			t.Errorf("ModInfo of a truncated %s module succeeded", ext)
		}
	}
	if _, err := ReadModule(filepath.Join(dir, "nosuch.ko.xz")); err == nil {
		t.Error("missing file: no error")
	}
}

// FuzzDecompress feeds arbitrary bytes (module files come from a
// downloaded package) to the decoders: an error or bytes, never a panic or
// more than MaxModuleSize.
func FuzzDecompress(f *testing.F) {
	mod := kmodtest.Module("license=GPL", "depends=a")
	f.Add(mod)
	f.Add([]byte("\xfd7zXZ\x00\x00\x04"))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x58})
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := decompress(bytes.NewReader(data))
		if err == nil && len(out) > MaxModuleSize {
			t.Fatalf("%d bytes out", len(out))
		}
		if err == nil {
			_, _ = modInfo("fuzz.ko", out)
		}
	})
}
