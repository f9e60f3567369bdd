package ramdisk

import (
	"reflect"
	"strings"
	"testing"
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
	if _, err := LookupKernelFlavour("sid"); err == nil || !strings.Contains(err.Error(), "bookworm, trixie, newest") {
		t.Errorf("unknown flavour: %v", err)
	}
}

// TestFlavourSources puts a flavour's suites on the host's mirrors: the
// security suite on the security archive, the others on the main one.
func TestFlavourSources(t *testing.T) {
	host := []string{
		"deb [signed-by=/k.gpg] http://mirror/debian bookworm",
		"deb [signed-by=/k.gpg] http://mirror/debian bookworm-updates",
		"deb [signed-by=/k.gpg] http://mirror/debian-security bookworm-security",
	}
	trixie, _ := LookupKernelFlavour("trixie")
	got, err := flavourSources(host, trixie)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"deb [signed-by=/k.gpg] http://mirror/debian trixie",
		"deb [signed-by=/k.gpg] http://mirror/debian trixie-updates",
		"deb [signed-by=/k.gpg] http://mirror/debian-security trixie-security",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	newest, _ := LookupKernelFlavour("newest")
	if got, err := flavourSources(host[:1], newest); err != nil || !reflect.DeepEqual(got, []string{
		"deb [signed-by=/k.gpg] http://mirror/debian trixie-backports", "deb [signed-by=/k.gpg] http://mirror/debian forky"}) {
		t.Errorf("newest: %q %v", got, err)
	}
	// No security mirror: an error, not a kernel without its security updates.
	if _, err := flavourSources(host[:2], trixie); err == nil || !strings.Contains(err.Error(), "trixie-security") {
		t.Errorf("no security mirror: %v", err)
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
