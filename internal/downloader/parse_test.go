package downloader

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
)

const hexA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
const hexB = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"

func TestParseSHA256(t *testing.T) {
	for _, tc := range []struct{ in, name, want, err string }{
		{hexA + "  ipa.tar.gz\n", "ipa.tar.gz", hexA, ""},
		{hexA + " *ipa.tar.gz\r\n", "ipa.tar.gz", hexA, ""},
		{hexA + "\n", "ipa.tar.gz", hexA, ""},
		{hexA + "  other\n" + hexB + "  dir/ipa.tar.gz\n", "ipa.tar.gz", strings.ToLower(hexB), ""},
		{hexA + "  other\n", "ipa.tar.gz", "", "no line for ipa.tar.gz"},
		{"", "x", "", "no digest"},
		{"abc  x\n", "x", "", "not a SHA-256"},
		{strings.Repeat("g", 64) + "  x\n", "x", "", "not a SHA-256"},
	} {
		got, err := ParseSHA256([]byte(tc.in), tc.name)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestETagAndCacheTag(t *testing.T) {
	h := "HTTP/1.1 301 Moved\r\nETag: \"old\"\r\n\r\nHTTP/2 200\r\netag: W/\"a/b\"\r\ncontent-length: 3\r\n\r\n"
	if got := ETag([]byte(h)); got != `W/"a/b"` {
		t.Errorf("ETag = %q", got)
	}
	if got := CacheTag(`W/"a/b"`); got != "W_a_b" {
		t.Errorf("CacheTag = %q", got)
	}
	if got := CacheTag(`"5f2b-61a0"`); got != "5f2b-61a0" {
		t.Errorf("CacheTag = %q", got)
	}
}

func tarball(t testing.TB, entries ...tar.Header) []byte {
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		h := h
		body := h.Name + " bytes"
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(body))
		}
	}
	tw.Close()
	gz.Close()
	return b.Bytes()
}

func extractAll(data []byte, names ...string) (map[string]string, error) {
	got := map[string]*bytes.Buffer{}
	var members []Member
	for _, n := range names {
		members = append(members, Member{Name: n, Open: func() (io.Writer, error) {
			got[n] = &bytes.Buffer{}
			return got[n], nil
		}})
	}
	err := Extract(bytes.NewReader(data), members)
	out := map[string]string{}
	for k, v := range got {
		out[k] = v.String()
	}
	return out, err
}

func TestExtract(t *testing.T) {
	tb := tarball(t, tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		tar.Header{Name: "./ipa.kernel", Typeflag: tar.TypeReg, Mode: 0o644},
		tar.Header{Name: "ipa.initramfs", Typeflag: tar.TypeReg, Mode: 0o644},
		tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644})
	got, err := extractAll(tb, "ipa.kernel", "ipa.initramfs")
	if err != nil || got["ipa.kernel"] != "./ipa.kernel bytes" || got["ipa.initramfs"] != "ipa.initramfs bytes" {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := extractAll(tb, "ipa.kernel", "other.initramfs"); err == nil || !strings.Contains(err.Error(), "no other.initramfs") {
		t.Errorf("missing member: %v", err)
	}
	link := tarball(t, tar.Header{Name: "ipa.kernel", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow"})
	if _, err := extractAll(link, "ipa.kernel"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("symlink member: %v", err)
	}
	if _, err := extractAll([]byte("not a tarball at all, just some text that is long enough to fill a header block"), "x"); err == nil {
		t.Error("garbage extracted without error")
	}
}

func FuzzParseSHA256(f *testing.F) {
	f.Add([]byte(hexA+"  ipa.tar.gz\n"), "ipa.tar.gz")
	f.Add([]byte(hexA+" *x\r\n"+hexB+"  y\n"), "y")
	f.Add([]byte(hexA), "z")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		sum, err := ParseSHA256(data, name)
		if err == nil && len(sum) != 64 {
			t.Fatalf("digest %q accepted", sum)
		}
	})
}

func FuzzETag(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nETag: \"abc\"\r\n\r\n"))
	f.Add([]byte("etag: W/\"../../x\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tag := CacheTag(ETag(data))
		if strings.ContainsAny(tag, "/\x00\"") || len(tag) > 128 {
			t.Fatalf("cache tag %q could name another path", tag)
		}
	})
}

func FuzzExtract(f *testing.F) {
	f.Add(tarball(f, tar.Header{Name: "a.kernel", Typeflag: tar.TypeReg}, tar.Header{Name: "a.initramfs", Typeflag: tar.TypeReg}))
	f.Add(tarball(f, tar.Header{Name: "a.kernel", Typeflag: tar.TypeSymlink, Linkname: "x"}))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0})
	f.Add([]byte{0xfd, '7', 'z', 'X', 'Z', 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := extractAll(data, "a.kernel", "a.initramfs")
		if err == nil && len(got) != 2 {
			t.Fatalf("no error, but %d members written", len(got))
		}
	})
}
