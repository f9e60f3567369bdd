package ramdisk

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
)

// TestModuleSignatures checks a real signed module of Debian's kernel
// (the default flavour's, as the build fetches it), then the same module
// with its signature stripped, and a re-packed one whose signature lost
// its header: the build's check fails on both, naming the module.
func TestModuleSignatures(t *testing.T) {
	cache, f := defaultFlavour(t)
	k, err := FetchKernel(context.Background(), cache, f, "")
	if err != nil {
		t.Skipf("SKIPPED: needs Debian's kernel (a mirror, or the cache the VM tests fill): %v", err)
	}
	tree, err := kmod.Open(k.ModulesDir)
	if err != nil {
		t.Fatal(err)
	}
	mods, err := tree.Resolve([]string{"virtio_blk"})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkModuleSignatures(k, mods); err != nil {
		t.Fatalf("Debian's own modules: %v", err)
	}
	var rel string
	for _, m := range mods {
		if m.Name == "virtio_blk" {
			rel = m.Path
		}
	}
	data, err := kmod.ReadModule(filepath.Join(k.ModulesDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := ModuleSignature(data); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	// strip-module's cut: the signature, its header and the trailer.
	n := int(binary.BigEndian.Uint32(data[len(data)-len(moduleSigMagic)-4:]))
	stripped := data[:len(data)-len(moduleSigMagic)-moduleSigInfoLen-n]
	noHeader := append(append([]byte{}, data[:len(data)-len(moduleSigMagic)-moduleSigInfoLen]...), moduleSigMagic...)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"stripped", stripped, "no appended signature"},
		{"re-packed", noHeader, "signature"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := ModuleSignature(c.data); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ModuleSignature: %v, want an error saying %q", err, c.want)
			}
			// The same module, as the build would take it, in a copy of
			// the tree's layout.
			bad := *k
			bad.ModulesDir = t.TempDir()
			p := filepath.Join(bad.ModulesDir, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			err := checkModuleSignatures(&bad, []kmod.Module{{Name: "virtio_blk", Path: rel}})
			if err == nil || !strings.Contains(err.Error(), "module virtio_blk ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("build check: %v, want an error naming virtio_blk and saying %q", err, c.want)
			}
			t.Logf("%v", err)
		})
	}
}

func TestModuleSignatureMalformed(t *testing.T) {
	for _, data := range [][]byte{nil, []byte(moduleSigMagic), []byte("x" + moduleSigMagic),
		append(make([]byte, 12), moduleSigMagic...), append([]byte{0, 0, 2, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, moduleSigMagic...)} {
		if err := ModuleSignature(data); err == nil {
			t.Errorf("ModuleSignature(%q) = nil, want an error", data)
		}
	}
}

func FuzzModuleSignature(f *testing.F) {
	f.Add([]byte("\x7fELF" + "\x30\x01\x02" + "\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x03" + moduleSigMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = ModuleSignature(data)
	})
}
