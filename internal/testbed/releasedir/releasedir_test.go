package releasedir

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
)

// testRelease lays out a release from two small files; RELEASEDIR_CHECK
// names a real release directory (`make release`'s output) to read
// instead, with RELEASEDIR_VERSION its version (default 0.2.0).
func testRelease(t *testing.T) *Release {
	t.Helper()
	if dir := os.Getenv("RELEASEDIR_CHECK"); dir != "" {
		v := os.Getenv("RELEASEDIR_VERSION")
		if v == "" {
			v = "0.2.0"
		}
		r, err := Read(dir, v, "amd64")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	src := t.TempDir()
	k, i := filepath.Join(src, "bzImage"), filepath.Join(src, "initrd.gz")
	if err := os.WriteFile(k, []byte("a kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(i, []byte("an initramfs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Write(filepath.Join(t.TempDir(), "release"), "0.2.0", "amd64", k, i, time.Unix(1767225600, 0))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const base = "https://releases.example.org/ironic-agent/0.2.0/"

func sha256Hex(t *testing.T, p string) string {
	t.Helper()
	d, err := cachedir.FileSHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestLayout checks the names of the release conventions, the
// sha256sum lines and SHA256SUMS against the files' own digests.
func TestLayout(t *testing.T) {
	r := testRelease(t)
	want := []string{"ironic-agent-0.2.0-amd64.kernel", "ironic-agent-0.2.0-amd64.initramfs",
		"dib/files/ipa-goagent-master.kernel", "dib/files/ipa-goagent-master.initramfs", "dib/ipa-goagent-master.tar.gz"}
	if got := []string{r.Kernel(), r.Initramfs(), r.IPAKernel(), r.IPAInitramfs(), r.IPATarball()}; !slices.Equal(got, want) {
		t.Fatalf("names %q, want %q", got, want)
	}
	for _, f := range want {
		d := sha256Hex(t, r.Path(f))
		line, err := os.ReadFile(r.Path(f + ".sha256"))
		if err != nil {
			t.Fatal(err)
		}
		if string(line) != d+"  "+path.Base(f)+"\n" {
			t.Errorf("%s.sha256 = %q, want %q", f, line, d+"  "+path.Base(f)+"\n")
		}
	}
	sums, err := os.ReadFile(r.Path("SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(strings.TrimSuffix(string(sums), "\n"), "\n") {
		d, name, ok := strings.Cut(l, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not sha256sum's", l)
		}
		if got := sha256Hex(t, r.Path(name)); got != d {
			t.Errorf("SHA256SUMS: %s = %s, the file's digest is %s", name, d, got)
		}
		names = append(names, name)
	}
	if !slices.IsSorted(names) {
		t.Errorf("SHA256SUMS is not sorted: %q", names)
	}
	var tree []string
	err = filepath.WalkDir(r.Dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(r.Dir, p)
		if rel = filepath.ToSlash(rel); rel != "SHA256SUMS" {
			tree = append(tree, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tree {
		if !slices.Contains(names, f) {
			t.Errorf("SHA256SUMS lacks %s", f)
		}
	}
}

// TestMetal3Tarball reads dib/ipa-goagent-master.tar.gz as Metal3's
// ironic-ipa-downloader does: IPA_FLAVOR=goagent, IPA_BRANCH=master give
// ipa-goagent-master.tar.gz, whose stem names the two files it links; they
// must be at the tarball's top level with the IPA-layout copies' bytes.
func TestMetal3Tarball(t *testing.T) {
	r := testRelease(t)
	filename := "ipa-" + "goagent" + "-" + strings.ReplaceAll("master", "/", "-") + ".tar.gz"
	if filename != path.Base(r.IPATarball()) {
		t.Fatalf("downloader's file name %s, release's %s", filename, r.IPATarball())
	}
	stem := Metal3Stem(filename)
	f, err := os.Open(r.Path(r.IPATarball()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	members := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.New()
		if _, err := io.Copy(s, tr); err != nil {
			t.Fatal(err)
		}
		members[h.Name] = hex.EncodeToString(s.Sum(nil))
	}
	for ext, copyOf := range map[string]string{".kernel": r.IPAKernel(), ".initramfs": r.IPAInitramfs()} {
		if got, want := members[stem+ext], sha256Hex(t, r.Path(copyOf)); got != want {
			t.Errorf("tarball member %s: SHA-256 %q, want %s's %s (members %v)", stem+ext, got, copyOf, want, members)
		}
	}
}

func TestMetal3Stem(t *testing.T) {
	for in, want := range map[string]string{
		"ipa-goagent-master.tar.gz":        "ipa-goagent-master",
		"ipa-goagent-arm64-master.tar.gz":  "ipa-goagent-arm64-master",
		"ipa-centos9-stable-2025.1.tar.gz": "ipa-centos9-stable-2025.1",
		"ipa.tar.gz.sha256":                "ipa",
		"ironic-agent-0.2.0-amd64.tgz":     "ironic-agent-0.2", // ${f%.*.*}: the last two dots
		"noext":                            "noext",
	} {
		if got := Metal3Stem(in); got != want {
			t.Errorf("Metal3Stem(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDeployersReadPerFileSums applies Bifrost's awk, Ansible get_url's
// rule (OpenStack-Ansible's os_ironic, Bifrost's download) to each
// per-file .sha256 with the URL a deployer downloads the file from: each
// yields exactly the file's digest.
func TestDeployersReadPerFileSums(t *testing.T) {
	r := testRelease(t)
	for _, f := range []string{r.Kernel(), r.Initramfs(), r.IPAKernel(), r.IPAInitramfs(), r.IPATarball()} {
		want := sha256Hex(t, r.Path(f))
		sums, err := os.ReadFile(r.Path(f + ".sha256"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := BifrostDigests(sums, path.Base(f))
		if err != nil || !slices.Equal(got, []string{want}) {
			t.Errorf("Bifrost's awk on %s.sha256: %q, %v; want [%s]", f, got, err, want)
		}
		if got, err := AnsibleGetURLDigest(sums, base+f); err != nil || got != want {
			t.Errorf("get_url on %s.sha256: %q, %v; want %s", f, got, err, want)
		}
	}
}

// TestDeployersReadSHA256SUMS pins what the deployers make of the
// release's SHA256SUMS given as the checksum URL instead: get_url finds
// the top-level files (its names are compared whole, so
// dib/files/ipa-goagent-master.kernel is not "ipa-goagent-master.kernel"),
// and Bifrost's awk prints every line containing the name, the .sha256
// file's line too where SHA256SUMS lists it, which fails its download.
// The docs therefore point both at the per-file .sha256.
func TestDeployersReadSHA256SUMS(t *testing.T) {
	r := testRelease(t)
	sums, err := os.ReadFile(r.Path("SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{r.Kernel(), r.Initramfs()} {
		want := sha256Hex(t, r.Path(f))
		if got, err := AnsibleGetURLDigest(sums, base+f); err != nil || got != want {
			t.Errorf("get_url on SHA256SUMS for %s: %q, %v; want %s", f, got, err, want)
		}
		lines := 1
		if strings.Contains(string(sums), "  "+f+".sha256\n") {
			lines++ // the .sha256 file's own line holds the name too
		}
		got, err := BifrostDigests(sums, path.Base(f))
		if err != nil || len(got) != lines || got[0] != want {
			t.Errorf("Bifrost's awk on SHA256SUMS for %s: %q, %v; want %d lines, %s first", f, got, err, lines, want)
		}
	}
	if _, err := AnsibleGetURLDigest(sums, base+r.IPAKernel()); err == nil {
		t.Errorf("get_url found %s in SHA256SUMS: its names are relative paths", r.IPAKernel())
	}
}

// TestBifrostAwk holds the awk reading to its program's rules.
func TestBifrostAwk(t *testing.T) {
	d := strings.Repeat("ab", 32)
	for _, c := range []struct {
		file, name string
		want       []string
	}{
		{d + "  ipa.kernel\n", "ipa.kernel", []string{d}},
		{d + "\n", "ipa.kernel", []string{d}},             // a bare digest
		{d + "  other\n", "ipa.kernel", nil},              // another file's line
		{strings.ToUpper(d) + "\n", "ipa.kernel", nil},    // ^[a-z0-9]+$ is lower case
		{d + " *ipa.kernel\n", "ipa.kernel", []string{d}}, // binary mode
		{d + "  ipaXkernel\n", "ipa.kernel", []string{d}}, // '.' matches any character
		{d + "  ipa.kernel\n" + d + "  ipa.kernel.sha256\n", "ipa.kernel", []string{d, d}},
		{d + "  ipa.kernel", "ipa.kernel", []string{d}}, // no final newline
	} {
		got, err := BifrostDigests([]byte(c.file), c.name)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("BifrostDigests(%q, %q) = %q, %v; want %q", c.file, c.name, got, err, c.want)
		}
	}
	if _, err := BifrostDigests(nil, "a(b"); err == nil {
		t.Error("a base name with regular-expression syntax was read")
	}
}

// TestAnsibleGetURL holds the get_url reading to its module's rules.
func TestAnsibleGetURL(t *testing.T) {
	d := strings.Repeat("ab", 32)
	u := "https://h/x/ipa.kernel"
	for _, c := range []struct {
		file, url, want string
		ok              bool
	}{
		{d + "  ipa.kernel\n", u, d, true},
		{d + " *ipa.kernel\n", u, d, true},
		{d + "  ./ipa.kernel\n", u, d, true},
		{d + "\n", u, d, true},                                         // one word alone
		{strings.ToUpper(d) + "\n", u, d, true},                        // lower-cased
		{d + "  files/ipa.kernel\n", u, "", false},                     // whole names only
		{d + "  other\n" + d + "  other2\n", u, "", false},             // no line for the file
		{"zz  ipa.kernel\n", u, "", false},                             // not hexadecimal
		{d + "\r\n", u, d, true},                                       // \r is a non-word character
		{d + "  ipa.kernel\n", "https://h/x/", "", false},              // index.html
		{"1111  ipa.kernel\n" + d + "  ipa.kernel\n", u, "1111", true}, // the first line wins
	} {
		got, err := AnsibleGetURLDigest([]byte(c.file), c.url)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("AnsibleGetURLDigest(%q, %q) = %q, %v; want %q (ok %v)", c.file, c.url, got, err, c.want, c.ok)
		}
	}
}

func TestWriteRefusesBadInput(t *testing.T) {
	r := testRelease(t)
	if os.Getenv("RELEASEDIR_CHECK") != "" {
		t.Skip("SKIPPED: reads a real release")
	}
	if _, err := Write(r.Dir, "0.2.0", "amd64", r.Path(r.Kernel()), r.Path(r.Initramfs()), time.Now()); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("second Write into %s: %v", r.Dir, err)
	}
	for _, c := range []struct{ v, a string }{{"", "amd64"}, {"0/2", "amd64"}, {"0.2.0", "x86_64"}} {
		if _, err := Write(t.TempDir(), c.v, c.a, "/nonexistent", "/nonexistent", time.Now()); err == nil {
			t.Errorf("Write(version %q, arch %q) took it", c.v, c.a)
		}
	}
}
