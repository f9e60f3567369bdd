package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The sidecar and the list are what sha256sum writes and checks; the list
// covers the tree but itself and hidden staging entries, sorted.
func TestSums(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "b.kernel"), "kernel")
	writeFile(t, filepath.Join(dir, "dib/files/a.initramfs"), "initramfs")
	writeFile(t, filepath.Join(dir, ".staging-1/x"), "half")
	writeFile(t, filepath.Join(dir, SumsName), "stale")
	if err := WriteSidecar(filepath.Join(dir, "b.kernel")); err != nil {
		t.Fatal(err)
	}
	side, _ := os.ReadFile(filepath.Join(dir, "b.kernel.sha256"))
	if !bytes.HasSuffix(side, []byte("  b.kernel\n")) || len(side) != 64+2+len("b.kernel")+1 {
		t.Errorf("sidecar %q is not '<hex>  b.kernel\\n'", side)
	}
	if err := WriteSums(dir); err != nil {
		t.Fatal(err)
	}
	list, _ := os.ReadFile(filepath.Join(dir, SumsName))
	var names []string
	for _, l := range strings.Split(strings.TrimSuffix(string(list), "\n"), "\n") {
		names = append(names, l[66:])
	}
	if got := strings.Join(names, " "); got != "b.kernel b.kernel.sha256 dib/files/a.initramfs" {
		t.Errorf("SHA256SUMS lists %q", got)
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		for _, args := range [][]string{{"-c", SumsName}, {"-c", "b.kernel.sha256"}} {
			cmd := exec.Command("sha256sum", args...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("sha256sum %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	}
	if err := os.Symlink("b.kernel", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := WriteSums(dir); err == nil || !strings.Contains(err.Error(), "link") {
		t.Errorf("a symbolic link in the tree: %v, want an error naming it", err)
	}
}

// The tar.gz is the same whatever the host files' dates, owners and
// order, holds the files at its top level, and its gzip header has no
// name or date.
func TestTarGzReproducible(t *testing.T) {
	dir := t.TempDir()
	k, i := filepath.Join(dir, "k"), filepath.Join(dir, "i")
	writeFile(t, k, "kernel bytes")
	writeFile(t, i, "initramfs bytes")
	mtime := time.Unix(1700000000, 0)
	a, b := filepath.Join(dir, "a.tar.gz"), filepath.Join(dir, "b.tar.gz")
	if err := WriteTarGz(a, []TarFile{{"ipa-goagent-master.kernel", k}, {"ipa-goagent-master.initramfs", i}}, mtime); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(k, time.Now(), time.Now())
	if err := WriteTarGz(b, []TarFile{{"ipa-goagent-master.initramfs", i}, {"ipa-goagent-master.kernel", k}}, mtime); err != nil {
		t.Fatal(err)
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Fatal("two archives of the same files differ")
	}
	zr, err := gzip.NewReader(bytes.NewReader(da))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header carries name %q, time %v", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(mtime) || h.Mode != 0o644 {
			t.Errorf("%s: owner %d:%d (%q:%q), mtime %v, mode %o", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime, h.Mode)
		}
	}
	if got := strings.Join(names, " "); got != "ipa-goagent-master.initramfs ipa-goagent-master.kernel" {
		t.Errorf("archive holds %q", got)
	}
}

// A release directory is never overwritten: other bytes under a name of
// the release fail naming the file, before anything moves; the same
// bytes are a rebuild.
func TestPublish(t *testing.T) {
	out := t.TempDir()
	stage := func(files map[string]string) string {
		s, err := os.MkdirTemp(out, ".staging-")
		if err != nil {
			t.Fatal(err)
		}
		for n, d := range files {
			writeFile(t, filepath.Join(s, n), d)
		}
		return s
	}
	mtime := time.Unix(1700000000, 0)
	files := map[string]string{"ironic-agent-0.2.0-amd64.kernel": "k", "dib/files/ipa-goagent-master.kernel": "k"}
	if err := publish(stage(files), out, mtime); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(out, "dib/files/ipa-goagent-master.kernel")); err != nil || !st.ModTime().Equal(mtime) {
		t.Errorf("published file: %v, %v", st, err)
	}
	if err := publish(stage(files), out, mtime); err != nil {
		t.Errorf("the same bytes again: %v", err)
	}
	writeFile(t, filepath.Join(out, SumsName), "list")
	other := map[string]string{"ironic-agent-0.2.0-amd64.kernel": "k", "dib/files/ipa-goagent-master.kernel": "other", "new": "n"}
	err := publish(stage(other), out, mtime)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(out, "dib/files/ipa-goagent-master.kernel")) {
		t.Fatalf("other bytes: %v, want an error naming the file", err)
	}
	if _, err := os.Stat(filepath.Join(out, "new")); err == nil {
		t.Error("a file moved in although the release was refused")
	}
	if _, err := os.Stat(filepath.Join(out, SumsName)); err != nil {
		t.Error("a refused release removed SHA256SUMS")
	}
}
