package ramdisk

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/debian"
)

func TestLookupKernelFlavour(t *testing.T) {
	f, err := LookupKernelFlavour("")
	if err != nil || f.Name != DefaultKernelFlavour || DefaultKernelFlavour != "trixie" {
		t.Errorf("default: %+v %v", f, err)
	}
	for _, n := range []string{"bookworm", "trixie", "newest"} {
		if f, err := LookupKernelFlavour(n); err != nil || f.Name != n || len(f.Suites) == 0 || f.About == "" {
			t.Errorf("%s: %+v %v", n, f, err)
		}
	}
	// The stable releases' kernels keep SizeBudget; the newest one's is
	// larger, never none.
	for _, f := range KernelFlavours() {
		want := int64(SizeBudget)
		if f.Name == "newest" {
			want = NewestSizeBudget
		}
		if f.Budget != want {
			t.Errorf("%s: budget %d MiB, want %d MiB", f.Name, f.Budget>>20, want>>20)
		}
	}
	if _, err := LookupKernelFlavour("sid"); err == nil || !strings.Contains(err.Error(), "bookworm, trixie, newest") {
		t.Errorf("unknown flavour: %v", err)
	}
}

// TestResolveMirrors takes the host's first Debian mirror of each kind,
// skips other distributions' sources, falls back to Debian's own for a
// kind the host lacks, and keeps what the caller set.
func TestResolveMirrors(t *testing.T) {
	etc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(etc, "sources.list.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	list := "deb http://ubuntu.example/ubuntu jammy main\n" +
		"deb [signed-by=/k.gpg] http://mirror/debian bookworm main\n" +
		"deb http://mirror2/debian bookworm-updates main\n" +
		"deb http://mirror/debian-security bookworm-security main\n"
	if err := os.WriteFile(filepath.Join(etc, "sources.list"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	if a, s := hostMirrors(etc); a != "http://mirror/debian" || s != "http://mirror/debian-security" {
		t.Errorf("host mirrors: %q %q", a, s)
	}
	if err := os.WriteFile(filepath.Join(etc, "sources.list"), []byte(list[:strings.LastIndex(list[:len(list)-1], "\n")+1]), 0o644); err != nil {
		t.Fatal(err)
	}
	if a, s := hostMirrors(etc); a != "http://mirror/debian" || s != "" {
		t.Errorf("no security source: %q %q", a, s)
	}
	if a, s := hostMirrors(t.TempDir()); a != "" || s != "" {
		t.Errorf("no sources: %q %q", a, s)
	}
	m, err := ResolveMirrors(debian.Mirrors{Archive: "https://a.example/debian/", Security: "http://s.example/ds"})
	if err != nil || m.Archive != "https://a.example/debian" || m.Security != "http://s.example/ds" {
		t.Errorf("set mirrors: %+v %v", m, err)
	}
	if _, err := ResolveMirrors(debian.Mirrors{Archive: "ftp://a.example/debian", Security: "http://s"}); err == nil || !strings.Contains(err.Error(), "ftp://a.example/debian") {
		t.Errorf("ftp mirror: %v", err)
	}
	if hostIgnoresValidUntil(etc) {
		t.Error("no apt.conf: Valid-Until ignored")
	}
	if err := os.MkdirAll(filepath.Join(etc, "apt.conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "apt.conf.d", "99snapshot"), []byte("// frozen\nAcquire::Check-Valid-Until \"false\";\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !hostIgnoresValidUntil(etc) {
		t.Error("Acquire::Check-Valid-Until \"false\" not read")
	}
}

func TestDecompressedSuffix(t *testing.T) {
	for config, want := range map[string]string{
		"CONFIG_MODULE_COMPRESS=y\nCONFIG_MODULE_COMPRESS_XZ=y\nCONFIG_MODULE_DECOMPRESS=y\n": ".ko.xz",
		"CONFIG_MODULE_COMPRESS_ZSTD=y\nCONFIG_MODULE_DECOMPRESS=y\n":                         ".ko.zst",
		"CONFIG_MODULE_COMPRESS_XZ=y\n# CONFIG_MODULE_DECOMPRESS is not set\n":                "",
		"CONFIG_MODULE_COMPRESS_NONE=y\n":                                                     "",
	} {
		if got := decompressedSuffix(config); got != want {
			t.Errorf("%q: %q, want %q", config, got, want)
		}
	}
}

func TestSplitKernelParts(t *testing.T) {
	deps := "dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, linux-base-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1), " +
		"linux-binary-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1), linux-modules-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1)\n"
	got := splitKernelParts(deps, "7.3.4+deb13-amd64")
	if want := []string{"linux-base-7.3.4+deb13-amd64", "linux-binary-7.3.4+deb13-amd64", "linux-modules-7.3.4+deb13-amd64"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := splitKernelParts("kmod, linux-base (>= 4.3~)", "6.12.118+deb13-amd64"); got != nil {
		t.Errorf("a whole image package: %v", got)
	}
}
