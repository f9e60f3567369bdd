package ramdisk

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod/kmodtest"
	"github.com/klauspost/compress/zstd"
)

// bzImage makes a stand-in x86 bzImage: a setup header (boot protocol
// 2.15, 3 setup sectors) whose payload fields point at the compressed
// kernel, followed by the 4-byte size the kernel build appends.
func bzImage(payload []byte, size int) []byte {
	const setupSects = 3
	img := make([]byte, (setupSects+1)*512)
	img[0x1f1] = setupSects
	copy(img[0x202:], "HdrS")
	le := binary.LittleEndian
	le.PutUint16(img[0x206:], 0x20f)
	const off = 100 // the decompressor's code would sit before the payload
	le.PutUint32(img[0x248:], off)
	le.PutUint32(img[0x24c:], uint32(len(payload)+4))
	img = append(img, make([]byte, off)...)
	img = append(img, payload...)
	img = le.AppendUint32(img, uint32(size))
	return append(img, make([]byte, 64)...) // trailing data after the payload
}

func TestExtractVmlinux(t *testing.T) {
	kernel := kmodtest.Module("stand-in=vmlinux")
	compressors := map[string]func() []byte{
		"gzip": func() []byte {
			var b bytes.Buffer
			w := gzip.NewWriter(&b)
			w.Write(kernel)
			w.Close()
			return b.Bytes()
		},
		"zstd": func() []byte {
			w, _ := zstd.NewWriter(nil)
			return w.EncodeAll(kernel, nil)
		},
		"xz": func() []byte {
			// As the kernel build does: the x86 BCJ filter, CRC32.
			if _, err := exec.LookPath("xz"); err != nil {
				t.Skipf("SKIPPED: needs xz (xz-utils, in test.sh): %v", err)
			}
			cmd := exec.Command("xz", "--check=crc32", "--x86", "--lzma2=dict=1MiB", "-c")
			cmd.Stdin = bytes.NewReader(kernel)
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			return out
		},
	}
	for name, compress := range compressors {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "vmlinuz")
			if err := os.WriteFile(p, bzImage(compress(), len(kernel)), 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := ExtractVmlinux(context.Background(), p, &out); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), kernel) {
				t.Errorf("extracted %d bytes, not the %d-byte kernel", out.Len(), len(kernel))
			}
			// The ELF has no PVH note: PVH refuses it and leaves nothing.
			if _, err := PVH(context.Background(), p); err == nil || !strings.Contains(err.Error(), "no PVH entry note") {
				t.Errorf("PVH of a kernel without the note: %v", err)
			}
			if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 1 {
				t.Errorf("files left beside the kernel: %v", ents)
			}
		})
	}
}

func TestExtractVmlinuxErrors(t *testing.T) {
	kernel := kmodtest.Module("stand-in=vmlinux")
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(kernel)
	w.Close()
	dir := t.TempDir()
	cases := map[string]struct {
		data []byte
		want string
	}{
		"not a bzImage": {[]byte("MZ this is no kernel"), "not an x86 bzImage"},
		"wrong size":    {bzImage(gz.Bytes(), len(kernel)+1), "the image says"},
		"lzma payload":  {bzImage([]byte{0x5d, 0, 0, 0x80, 0, 1, 2, 3}, 8), "other than gzip, zstd or xz"},
		"truncated":     {bzImage(gz.Bytes(), len(kernel))[:0x300], "outside the"},
		"bad gzip":      {bzImage(append([]byte{0x1f, 0x8b}, make([]byte, 40)...), 40), "gzip payload"},
	}
	for name, c := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(p, c.data, 0o644)
		if err := ExtractVmlinux(context.Background(), p, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}

// TestPVHOfDebianKernel extracts the cached Debian kernel (the one the VM
// tests boot) and finds its PVH entry.
func TestPVHOfDebianKernel(t *testing.T) {
	cache, err := cachedir.Dir()
	if err != nil {
		t.Skipf("SKIPPED: no cache directory: %v", err)
	}
	m, _ := filepath.Glob(filepath.Join(cache, "kernel", "*", "vmlinuz"))
	if len(m) == 0 {
		t.Skip("SKIPPED: no Debian kernel in the cache yet (the VM tests and mkramdisk fetch one)")
	}
	// A copy: the test must not race the VM tests' own PVH file.
	dir := t.TempDir()
	if err := copyFile(m[0], filepath.Join(dir, "vmlinuz")); err != nil {
		t.Fatal(err)
	}
	p, err := PVH(context.Background(), filepath.Join(dir, "vmlinuz"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Size() < 8<<20 {
		t.Fatalf("vmlinux %s: %v %v", p, st, err)
	}
	// The payload undone in Go (xz with its x86 BCJ filter, or zstd, which
	// Debian's kernels use since 6.12.118) gives the bytes of the
	// format's own tool.
	data, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	payload, _, err := bzPayload(data)
	if err != nil {
		t.Fatal(err)
	}
	tool := ""
	switch {
	case bytes.HasPrefix(payload, []byte("\xfd7zXZ\x00")):
		tool = "xz"
	case bytes.HasPrefix(payload, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		tool = "zstd"
	default:
		t.Logf("payload starts % x: no tool to compare with", payload[:min(len(payload), 6)])
	}
	if _, err := exec.LookPath(tool); tool != "" && err == nil {
		cmd := exec.Command(tool, "-dc")
		cmd.Stdin = bytes.NewReader(payload)
		want, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s -dc: %v", tool, err)
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("vmlinux differs from %s -dc's (%d and %d bytes)", tool, len(got), len(want))
		}
	}
	// Made once: the second call finds it.
	if p2, err := PVH(context.Background(), filepath.Join(dir, "vmlinuz")); err != nil || p2 != p {
		t.Errorf("second call: %s %v", p2, err)
	}
}

// FuzzBzPayload: a kernel file is downloaded bytes; its header fields
// must never send the slicing out of bounds.
func FuzzBzPayload(f *testing.F) {
	f.Add(bzImage([]byte{0x1f, 0x8b, 8, 0, 1, 2, 3, 4}, 4))
	f.Add([]byte("HdrS"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, _, err := bzPayload(data)
		if err == nil && len(p) > len(data) {
			t.Fatalf("payload of %d bytes from a %d-byte file", len(p), len(data))
		}
	})
}
