package ocirootfs

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

func layer(t *testing.T, entries ...tar.Header) *bytes.Reader {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range entries {
		h := h
		h.Uid, h.Gid = os.Getuid(), os.Getgid()
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		body := []byte(h.Name)
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(body)
		}
	}
	tw.Close()
	return bytes.NewReader(b.Bytes())
}

func tree(t *testing.T, root string) []string {
	var out []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if p != root {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// Whiteouts as the image spec has them: .wh.<name> removes a lower layer's
// entry; .wh..wh..opq hides everything the lower layers put in its
// directory, but not what its own layer puts there.
func TestApplyLayerWhiteouts(t *testing.T) {
	root := t.TempDir()
	dir := tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}
	d := func(n string) tar.Header { h := dir; h.Name = n; return h }
	f := func(n string) tar.Header { return tar.Header{Name: n, Typeflag: tar.TypeReg} }
	if err := ApplyLayer(root, layer(t, d("a/"), f("a/keep"), f("a/gone"), d("b/"), f("b/old"), f("b/old2"))); err != nil {
		t.Fatal(err)
	}
	if err := ApplyLayer(root, layer(t, f("a/.wh.gone"), d("b/"), f("b/new"), f("b/.wh..wh..opq"), tar.Header{Name: "a/link", Typeflag: tar.TypeSymlink, Linkname: "keep"})); err != nil {
		t.Fatal(err)
	}
	got := tree(t, root)
	want := []string{"a", "a/keep", "a/link", "b", "b/new"}
	if len(got) != len(want) {
		t.Fatalf("tree %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("tree %v, want %v", got, want)
		}
	}
}
