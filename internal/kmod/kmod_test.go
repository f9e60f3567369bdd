package kmod

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/kmod/kmodtest"
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
	if d := deps(got); !reflect.DeepEqual(d, []string{"a", "b", "c", "d"}) {
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
		for _, d := range deps(ParseModInfo(data)) {
			if d == "" || strings.Contains(d, "-") {
				t.Fatalf("bad dependency %q", d)
			}
		}
	})
}
