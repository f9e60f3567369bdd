package image

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"
)

// xzTool compresses data with xz(1) and the given options.
func xzTool(t *testing.T, data []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("xz", append([]string{"-c", "-T1"}, args...)...)
	cmd.Stdin = bytes.NewReader(data)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("xz %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out.Bytes()
}

func xzTestData() []byte {
	r := rand.NewChaCha8([32]byte{'x', 'z'})
	data := make([]byte, 3<<20)
	r.Read(data[:1<<20]) // incompressible, then text, then zeros
	for i := 1 << 20; i < 2<<20; i++ {
		data[i] = "ironic agent xz stream\n"[i%23]
	}
	return data
}

func decodeXZ(t *testing.T, b []byte) ([]byte, error) {
	t.Helper()
	x, err := newXZReader(bytes.NewReader(b), xzMaxDict)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(x)
}

// TestXZReaderMatchesXZ decodes what xz(1) writes in every shape an image
// may come in: each check type, many blocks, concatenated streams with
// stream padding, an empty input; and what ulikunitz/xz's writer makes.
func TestXZReaderMatchesXZ(t *testing.T) {
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skipf("SKIPPED: needs xz (test.sh APT_PACKAGES): %v", err)
	}
	data := xzTestData()
	want := sha256.Sum256(data)
	cases := map[string][]byte{
		"crc64 default":       xzTool(t, data),
		"crc32":               xzTool(t, data, "--check=crc32"),
		"sha256":              xzTool(t, data, "--check=sha256"),
		"none":                xzTool(t, data, "--check=none"),
		"blocks of 100 KiB":   xzTool(t, data, "--block-size=100KiB"),
		"-9e (64 MiB dict)":   xzTool(t, data, "-9e"),
		"-0 (256 KiB dict)":   xzTool(t, data, "-0"),
		"concatenated":        append(xzTool(t, data[:1<<20]), xzTool(t, data[1<<20:])...),
		"with stream padding": append(append(xzTool(t, data[:2<<20]), 0, 0, 0, 0, 0, 0, 0, 0), xzTool(t, data[2<<20:], "--check=sha256")...),
	}
	var lib bytes.Buffer
	w, err := xz.NewWriter(&lib)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	w.Close()
	cases["ulikunitz writer"] = lib.Bytes()
	for name, b := range cases {
		got, err := decodeXZ(t, b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if sha256.Sum256(got) != want {
			t.Errorf("%s: decoded %d bytes that differ from the %d compressed", name, len(got), len(data))
		}
	}
	if got, err := decodeXZ(t, xzTool(t, nil)); err != nil || len(got) != 0 {
		t.Errorf("empty input: %d bytes, %v", len(got), err)
	}
}

// TestXZReaderRefuses covers what must fail with a clear error, never
// decode wrongly: a dictionary above the bound (ulikunitz/xz's reader would
// allocate it), corrupt data caught by the block check, truncation,
// trailing garbage and filters other than LZMA2.
func TestXZReaderRefuses(t *testing.T) {
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skipf("SKIPPED: needs xz (test.sh APT_PACKAGES): %v", err)
	}
	data := xzTestData()[:1<<20+4096]
	good := xzTool(t, data, "--check=crc32")
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)/2] ^= 0x40
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"128 MiB dictionary", xzTool(t, data, "--lzma2=dict=128MiB"), "128 MiB LZMA2 dictionary"},
		{"1536 MiB dictionary", xzTool(t, data[:4096], "--lzma2=dict=1536MiB"), "1536 MiB LZMA2 dictionary"},
		{"x86 BCJ filter", xzTool(t, data, "--x86", "--lzma2=preset=1"), "only LZMA2"},
		{"corrupt", corrupt, "xz image"},
		{"truncated", good[:len(good)-20], "xz image"},
		{"trailing garbage", append(bytes.Clone(good), 1, 2, 3, 4, 5), "trailing garbage"},
		{"not xz", []byte("plain text, not an xz stream"), "no xz stream header"},
	}
	for _, c := range cases {
		_, err := decodeXZ(t, c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// FuzzXZReader: any bytes give data or an error, never a panic, and no
// block may make the reader take a dictionary above the bound.
func FuzzXZReader(f *testing.F) {
	var b bytes.Buffer
	w, _ := xz.NewWriter(&b)
	w.Write([]byte(strings.Repeat("ironic-agent ", 300)))
	w.Close()
	f.Add(b.Bytes())
	f.Add(append(bytes.Clone(xzStreamMagic), 0, 1, 0x69, 0x22, 0xde, 0x36))
	f.Fuzz(func(t *testing.T, in []byte) {
		x, err := newXZReader(bytes.NewReader(in), 1<<20)
		if err != nil {
			return
		}
		io.Copy(io.Discard, io.LimitReader(x, 64<<20))
	})
}
