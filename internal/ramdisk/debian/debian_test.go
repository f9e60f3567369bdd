package debian

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"1.0", "1.0", 0},
		{"1.0", "1.1", -1},
		{"1.10", "1.9", 1},
		{"1.0~rc1", "1.0", -1},
		{"1.0~rc1", "1.0~rc2", -1},
		{"1.0~~", "1.0~", -1},
		{"1.0", "1.0+b1", -1},
		{"1.0a", "1.0", 1},
		{"1.0a", "1.0+", -1}, // letters sort before other characters
		{"1:1.0", "2.0", 1},
		{"0:1.0", "1.0", 0},
		{"1.0-1", "1.0-2", -1},
		{"1.0-10", "1.0-9", 1},
		{"1.0", "1.0-0", 0},
		{"6.12.57-1", "6.12.57-1~bpo12+1", 1},
		{"6.12.118-1", "6.12.57-1", 1},
		{"7.3.4-1~bpo13+1", "6.17.8-1", 1},
		{"20241210-2", "20230210-5", 1},
		{"2.41-12+deb13u1", "2.41-12", 1},
		{"1.00", "1.0", 0},
		{"1.0.0", "1.0", 1},
		{"", "0", 0},
		{"1.0-1", "1.0-1.1", -1},
	} {
		got := CompareVersions(c.a, c.b)
		if signOf(got) != c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want sign %d", c.a, c.b, got, c.want)
		}
		if signOf(CompareVersions(c.b, c.a)) != -c.want {
			t.Errorf("CompareVersions(%q, %q) is not the opposite", c.b, c.a)
		}
	}
}

func signOf(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

const packagesText = `Package: linux-image-amd64
Source: linux-signed-amd64 (6.12.57+deb13u1)
Version: 6.12.57-1
Architecture: amd64
Depends: linux-image-6.12.57+deb13-amd64 (= 6.12.57-1)
Description: Linux for 64-bit PCs (meta-package)
 This package depends on the latest Linux kernel
 .
 and more.
Filename: pool/main/l/linux-signed-amd64/linux-image-amd64_6.12.57-1_amd64.deb
Size: 1234
SHA256: 0000000000000000000000000000000000000000000000000000000000000001

Package: firmware-bnx2
Version: 20230210-5
Architecture: all
Filename: pool/non-free-firmware/f/firmware-nonfree/firmware-bnx2_20230210-5_all.deb
Size: 99
SHA256: 0000000000000000000000000000000000000000000000000000000000000002
`

func TestReadPackages(t *testing.T) {
	var got []Package
	if err := ReadPackages(strings.NewReader(packagesText), "Packages", func(p Package) { got = append(got, p) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d packages: %+v", len(got), got)
	}
	k := got[0]
	if k.Name != "linux-image-amd64" || k.Version != "6.12.57-1" || k.Source != "linux-signed-amd64" || k.Size != 1234 ||
		!strings.HasPrefix(k.Depends, "linux-image-6.12.57+deb13-amd64") || !strings.HasSuffix(k.SHA256, "01") {
		t.Errorf("kernel: %+v", k)
	}
	if got[1].Source != "firmware-bnx2" {
		t.Errorf("a package without Source is its own source: %+v", got[1])
	}
	for _, bad := range []string{
		"Package: a\nVersion: 1\nFilename: ../a.deb\nSize: 1\nSHA256: " + strings.Repeat("0", 64) + "\n",
		"Package: a\nVersion: 1\nFilename: a.deb\nSize: 1\nSHA256: 12\n",
		"Package: a\nFilename: a.deb\nSize: 1\nSHA256: " + strings.Repeat("0", 64) + "\n",
		" continuation first\n",
		"no colon here\n",
	} {
		if err := ReadPackages(strings.NewReader(bad), "Packages", func(Package) {}); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestParseDepends(t *testing.T) {
	got := ParseDepends("uuid-runtime, libc6 (>= 2.34), libjson-c5 (>= 0.15) | libjson-c4, python3:any,\n zlib1g (>= 1:1.1.4) [amd64], libc6")
	want := []string{"uuid-runtime", "libc6", "libjson-c5", "python3", "zlib1g"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// fakeArchive is a Debian archive served by httptest, signed with a
// key made for the test.
type fakeArchive struct {
	srv   *httptest.Server
	key   *openpgp.Entity
	files map[string][]byte // URL path -> bytes
	// override serves other bytes for a path than the index says.
	override map[string][]byte
	// byHash makes addSuite publish each index under its digest too
	// (by-hash/SHA256/) and say so (Acquire-By-Hash: yes).
	byHash bool
}

func newFakeArchive(t *testing.T) *fakeArchive {
	t.Helper()
	a := &fakeArchive{key: newKey(t), files: map[string][]byte{}, override: map[string][]byte{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, ok := a.override[r.URL.Path]; ok {
			w.Write(b)
			return
		}
		b, ok := a.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func newKey(t *testing.T) *openpgp.Entity {
	t.Helper()
	e, err := openpgp.NewEntity("test archive", "", "archive@example.invalid", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// deb is a package for the fake archive.
type deb struct {
	name, version string
	control       string // extra control fields
	files         []tar.Header
	data          map[string]string
}

func (d deb) build(t *testing.T) []byte {
	t.Helper()
	tgz := func(hdrs []tar.Header, data map[string]string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		tw := tar.NewWriter(zw)
		for _, h := range hdrs {
			h.Size = int64(len(data[h.Name]))
			if h.Typeflag != tar.TypeReg {
				h.Size = 0
			}
			if err := tw.WriteHeader(&h); err != nil {
				t.Fatal(err)
			}
			if h.Size > 0 {
				tw.Write([]byte(data[h.Name]))
			}
		}
		tw.Close()
		zw.Close()
		return b.Bytes()
	}
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: amd64\n%s", d.name, d.version, d.control)
	members := []struct {
		name string
		data []byte
	}{
		{"debian-binary", []byte("2.0\n")},
		{"control.tar.gz", tgz([]tar.Header{{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: "./control", Typeflag: tar.TypeReg, Mode: 0o644}},
			map[string]string{"./control": control})},
		{"data.tar.gz", tgz(d.files, d.data)},
	}
	var b bytes.Buffer
	b.WriteString("!<arch>\n")
	for _, m := range members {
		fmt.Fprintf(&b, "%-16s%-12d%-6d%-6d%-8s%-10d`\n", m.name, 0, 0, 0, "100644", len(m.data))
		b.Write(m.data)
		if len(m.data)%2 == 1 {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// addSuite publishes suite with the packages debs (component main), its
// InRelease signed by signer.
func (a *fakeArchive) addSuite(t *testing.T, suite string, signer *openpgp.Entity, debs ...deb) {
	t.Helper()
	var pk strings.Builder
	for _, d := range debs {
		b := d.build(t)
		fn := fmt.Sprintf("pool/main/%s_%s_amd64.deb", d.name, d.version)
		a.files["/"+fn] = b
		sum := sha256.Sum256(b)
		fmt.Fprintf(&pk, "Package: %s\nVersion: %s\nArchitecture: amd64\n%sFilename: %s\nSize: %d\nSHA256: %x\n\n", d.name, d.version, d.control, fn, len(b), sum)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(pk.String()))
	zw.Close()
	contents := "lib/firmware/bnx2/x.fw  non-free-firmware/firmware-bnx2\n"
	var cgz bytes.Buffer
	zw = gzip.NewWriter(&cgz)
	zw.Write([]byte(contents))
	zw.Close()
	idx := map[string][]byte{"main/binary-amd64/Packages.gz": gz.Bytes(), "main/Contents-all.gz": cgz.Bytes()}
	var rel strings.Builder
	fmt.Fprintf(&rel, "Origin: Debian\nSuite: %s\nCodename: %s\nDate: Sat, 21 Nov 2026 09:15:44 UTC\n", suite, suite)
	if a.byHash {
		rel.WriteString("Acquire-By-Hash: yes\n")
	}
	rel.WriteString("SHA256:\n")
	for p, b := range idx {
		a.files["/dists/"+suite+"/"+p] = b
		if a.byHash {
			a.files[fmt.Sprintf("/dists/%s/%s/by-hash/SHA256/%x", suite, path.Dir(p), sha256.Sum256(b))] = b
		}
		fmt.Fprintf(&rel, " %x %d %s\n", sha256.Sum256(b), len(b), p)
	}
	a.files["/dists/"+suite+"/InRelease"] = sign(t, signer, rel.String())
}

func sign(t *testing.T, e *openpgp.Entity, text string) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := clearsign.Encode(&b, e.PrivateKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(text))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func (a *fakeArchive) client(t *testing.T) *Client {
	return &Client{Mirrors: Mirrors{Archive: a.srv.URL, Security: a.srv.URL}, Arch: "amd64", Cache: t.TempDir(),
		Keyring: openpgp.EntityList{a.key}}
}

var firmwareDeb = deb{name: "firmware-bnx2", version: "1.0-1", control: "Depends: libc6 (>= 2.34), zlib1g | libz\n",
	files: []tar.Header{
		{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./lib/firmware/bnx2/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./lib/firmware/bnx2/x.fw", Typeflag: tar.TypeReg, Mode: 0o644, ModTime: time.Unix(1700000000, 0)},
		{Name: "./lib/firmware/bnx2/y.fw", Typeflag: tar.TypeSymlink, Linkname: "x.fw"},
		{Name: "./lib/firmware/bnx2/z.fw", Typeflag: tar.TypeLink, Linkname: "./lib/firmware/bnx2/x.fw"},
		{Name: "./usr/bin/tool", Typeflag: tar.TypeReg, Mode: 0o755},
	},
	data: map[string]string{"./lib/firmware/bnx2/x.fw": "firmware bytes", "./usr/bin/tool": "#!/bin/sh\n"}}

// TestFakeArchive fetches through a served archive: the highest version
// across suites, a verified download, its extraction and control file,
// and the Contents index.
func TestFakeArchive(t *testing.T) {
	a := newFakeArchive(t)
	older := firmwareDeb
	older.version = "1.0~rc1-1"
	a.addSuite(t, "trixie", a.key, older)
	a.addSuite(t, "trixie-updates", a.key, firmwareDeb)
	c := a.client(t)
	ctx := t.Context()
	ix, err := c.Packages(ctx, []string{"trixie", "trixie-updates"}, []string{"main"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ix.Get("firmware-bnx2")
	if err != nil || p.Version != "1.0-1" || p.Suite != "trixie-updates" || p.URL != a.srv.URL+"/pool/main/firmware-bnx2_1.0-1_amd64.deb" {
		t.Fatalf("lookup: %+v %v", p, err)
	}
	if _, err := ix.Get("nosuch"); err == nil || !strings.Contains(err.Error(), "trixie, trixie-updates") {
		t.Errorf("a package in no suite: %v", err)
	}
	debPath, err := c.Download(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Extract(debPath, dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "lib/firmware/bnx2/y.fw")); err != nil || string(b) != "firmware bytes" {
		t.Errorf("symbolic link: %q %v", b, err)
	}
	st1, _ := os.Stat(filepath.Join(dir, "lib/firmware/bnx2/x.fw"))
	st2, err := os.Stat(filepath.Join(dir, "lib/firmware/bnx2/z.fw"))
	if err != nil || !os.SameFile(st1, st2) {
		t.Errorf("hard link: %v", err)
	}
	if !st1.ModTime().Equal(time.Unix(1700000000, 0)) {
		t.Errorf("modification time %v", st1.ModTime())
	}
	if st, err := os.Stat(filepath.Join(dir, "usr/bin/tool")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("executable: %v %v", st, err)
	}
	ctl, err := Control(debPath)
	if err != nil || ctl.Get("Version") != "1.0-1" || !slices.Equal(ParseDepends(ctl.Get("Depends")), []string{"libc6", "zlib1g"}) {
		t.Errorf("control: %v %v", ctl, err)
	}
	// A second download is the cached file, verified again.
	a.override["/pool/main/firmware-bnx2_1.0-1_amd64.deb"] = []byte("not served again")
	if again, err := c.Download(ctx, p); err != nil || again != debPath {
		t.Errorf("cached download: %s %v", again, err)
	}
	rs, err := c.Contents(ctx, []string{"trixie", "trixie-updates"}, "main", "all")
	if err != nil || len(rs) != 2 {
		t.Fatalf("contents: %d %v", len(rs), err)
	}
	for _, r := range rs {
		r.Close()
	}
	// A component no suite publishes a Contents of is ErrNoContents.
	if _, err := c.Contents(ctx, []string{"trixie"}, "non-free-firmware", "all"); !errors.Is(err, ErrNoContents) {
		t.Errorf("no such index: %v, want ErrNoContents", err)
	}
}

// TestDigestMismatch: a mirror serving other bytes than the index says
// fails naming the package, version, URL and both digests, and leaves
// nothing in the cache.
func TestDigestMismatch(t *testing.T) {
	a := newFakeArchive(t)
	a.addSuite(t, "trixie", a.key, firmwareDeb)
	url := "/pool/main/firmware-bnx2_1.0-1_amd64.deb"
	a.override[url] = bytes.Repeat([]byte("x"), len(a.files[url]))
	c := a.client(t)
	ix, err := c.Packages(t.Context(), []string{"trixie"}, []string{"main"})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := ix.Get("firmware-bnx2")
	_, err = c.Download(t.Context(), p)
	var de *DigestError
	got := sha256.Sum256(a.override[url])
	if !errors.As(err, &de) {
		t.Fatalf("want a DigestError, got %v", err)
	}
	for _, s := range []string{"firmware-bnx2", "1.0-1", a.srv.URL + url, p.SHA256, hex.EncodeToString(got[:])} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q: %v", s, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(c.Cache, "by-hash", "*", "*.deb"))
	if len(left) != 0 {
		t.Errorf("left in the cache: %v", left)
	}
	// A damaged index fails the same way.
	a2 := newFakeArchive(t)
	a2.addSuite(t, "trixie", a2.key, firmwareDeb)
	a2.override["/dists/trixie/main/binary-amd64/Packages.gz"] = []byte("garbage")
	if _, err := a2.client(t).Packages(t.Context(), []string{"trixie"}, []string{"main"}); !errors.As(err, &de) || !strings.Contains(err.Error(), "Packages.gz") {
		t.Errorf("damaged index: %v", err)
	}
}

// TestRepublishedSuite: a suite republished since the cached InRelease
// was fetched (its indexes now have other digests, or the old ones are
// gone) is read through its current InRelease, fetched once, instead of
// failing on the digest the stale one names.
func TestRepublishedSuite(t *testing.T) {
	a := newFakeArchive(t)
	a.addSuite(t, "trixie-backports", a.key, firmwareDeb)
	c := a.client(t)
	if _, err := c.Release(t.Context(), "trixie-backports"); err != nil {
		t.Fatal(err)
	}
	stale := a.client(t) // another cache holding the same InRelease
	if _, err := stale.Release(t.Context(), "trixie-backports"); err != nil {
		t.Fatal(err)
	}
	newer := firmwareDeb
	newer.version = "1.1-1~bpo13+1"
	a.addSuite(t, "trixie-backports", a.key, newer)
	again := *c // a later run with the same cache
	ix, err := again.Packages(t.Context(), []string{"trixie-backports"}, []string{"main"})
	if err != nil {
		t.Fatalf("republished suite: %v", err)
	}
	if p, err := ix.Get("firmware-bnx2"); err != nil || p.Version != newer.version {
		t.Errorf("read %+v, %v; want version %s", p, err, newer.version)
	}
	rs, err := again.Contents(t.Context(), []string{"trixie-backports"}, "main", "all")
	if err != nil {
		t.Fatalf("contents of the republished suite: %v", err)
	}
	for _, r := range rs {
		r.Close()
	}
	// Bytes that match neither the cached nor the current InRelease
	// still fail.
	newest := firmwareDeb
	newest.version = "1.2-1~bpo13+1"
	a.addSuite(t, "trixie-backports", a.key, newest)
	a.override["/dists/trixie-backports/main/binary-amd64/Packages.gz"] = []byte("garbage")
	var de *DigestError
	if _, err := stale.Packages(t.Context(), []string{"trixie-backports"}, []string{"main"}); !errors.As(err, &de) {
		t.Errorf("damaged index of a cached suite: %v, want a DigestError", err)
	}
}

// TestIndexByHash: an index whose own name serves other bytes than the
// InRelease names (the mirror published it again, or is out of sync) is
// read from its copy by hash when the suite has them, as apt does; when
// that copy is gone too, the error names the suite, the index, both
// digests, the copy by hash and the InRelease with its date.
func TestIndexByHash(t *testing.T) {
	a := newFakeArchive(t)
	a.byHash = true
	a.addSuite(t, "trixie-backports", a.key, firmwareDeb)
	const contents = "/dists/trixie-backports/main/Contents-all.gz"
	a.override[contents] = []byte("a later publication")
	rs, err := a.client(t).Contents(t.Context(), []string{"trixie-backports"}, "main", "all")
	if err != nil {
		t.Fatalf("index served by hash: %v", err)
	}
	for _, r := range rs {
		r.Close()
	}
	sum := sha256.Sum256(a.files[contents])
	delete(a.files, fmt.Sprintf("/dists/trixie-backports/main/by-hash/SHA256/%x", sum))
	_, err = a.client(t).Contents(t.Context(), []string{"trixie-backports"}, "main", "all")
	var de *DigestError
	if !errors.As(err, &de) {
		t.Fatalf("no copy by hash: %v, want a DigestError", err)
	}
	for _, w := range []string{"suite trixie-backports index main/Contents-all.gz", fmt.Sprintf("%x", sum),
		fmt.Sprintf("by-hash/SHA256/%x: 404 Not Found", sum), "/dists/trixie-backports/InRelease, dated Sat, 21 Nov 2026 09:15:44 UTC", "out of sync"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
}

// TestSignature: a tampered InRelease, one signed by a key the client
// does not trust, and an unsigned one fail naming the suite and URL.
func TestSignature(t *testing.T) {
	a := newFakeArchive(t)
	a.addSuite(t, "trixie", a.key, firmwareDeb)
	a.addSuite(t, "forky", newKey(t), firmwareDeb)
	good := a.files["/dists/trixie/InRelease"]
	a.addSuite(t, "sid", a.key, firmwareDeb)
	a.files["/dists/sid/InRelease"] = bytes.Replace(a.files["/dists/sid/InRelease"], []byte("Codename: sid"), []byte("Codename: six"), 1)
	a.files["/dists/bare/InRelease"] = []byte("Suite: bare\nSHA256:\n")
	c := a.client(t)
	if _, err := c.Release(t.Context(), "trixie"); err != nil {
		t.Fatalf("good signature: %v", err)
	}
	for _, suite := range []string{"forky", "sid", "bare"} {
		_, err := c.Release(t.Context(), suite)
		if !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), "suite "+suite) || !strings.Contains(err.Error(), a.srv.URL+"/dists/"+suite+"/InRelease") {
			t.Errorf("%s: %v", suite, err)
		}
	}
	// Text around the signed block is not read.
	withExtra := append(append([]byte{}, good...), []byte("\nSHA256:\n "+strings.Repeat("0", 64)+" 1 evil\n")...)
	r, err := ParseInRelease(withExtra, openpgp.EntityList{a.key}, "trixie", "u", time.Now())
	if err != nil || len(r.Files) != 2 {
		t.Errorf("trailing text: %v %v", r, err)
	}
	// Debian's own keys load.
	if kr, err := DebianKeyring(); err != nil || len(kr) < 6 {
		t.Errorf("Debian's keyring: %d keys, %v", len(kr), err)
	}
}

// TestValidUntil: an expired security suite fails.
func TestValidUntil(t *testing.T) {
	k := newKey(t)
	until := time.Now().Add(5 * 24 * time.Hour).UTC()
	text := "Suite: trixie-security\nValid-Until: " + until.Format(time.RFC1123) + "\nSHA256:\n " + strings.Repeat("0", 64) + " 1 main/binary-amd64/Packages\n"
	b := sign(t, k, text)
	kr := openpgp.EntityList{k}
	r, err := ParseInRelease(b, kr, "trixie-security", "u", time.Now())
	if err != nil || r.Expired(time.Now()) != nil {
		t.Fatalf("valid: %v", err)
	}
	if err := r.Expired(until.Add(time.Hour)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: %v", err)
	}
	// Through a client: refused, unless the mirror is declared frozen.
	a := newFakeArchive(t)
	a.files["/dists/trixie-security/InRelease"] = sign(t, a.key, text)
	c := a.client(t)
	c.Now = func() time.Time { return until.Add(time.Hour) }
	if _, err := c.Release(t.Context(), "trixie-security"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired through the client: %v", err)
	}
	c.Mirrors.IgnoreValidUntil = true
	if _, err := c.Release(t.Context(), "trixie-security"); err != nil {
		t.Errorf("frozen mirror: %v", err)
	}
}

// TestUnreachableMirror names the URL.
func TestUnreachableMirror(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	c := &Client{Mirrors: Mirrors{Archive: u, Security: u}, Arch: "amd64", Cache: t.TempDir()}
	_, err := c.Packages(t.Context(), []string{"trixie"}, []string{"main"})
	if err == nil || !strings.Contains(err.Error(), u+"/dists/trixie/InRelease") || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("unreachable: %v", err)
	}
	a := newFakeArchive(t)
	c = a.client(t)
	if _, err := c.Release(t.Context(), "nosuch"); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "/dists/nosuch/InRelease") {
		t.Errorf("missing suite: %v", err)
	}
}

// TestExtractRefusesEscapes: members leaving the target directory, by
// path or through a link of the package, fail the extraction and write
// nothing outside.
func TestExtractRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	for name, files := range map[string][]tar.Header{
		"dotdot":   {{Name: "./../escaped", Typeflag: tar.TypeReg, Mode: 0o644}},
		"absolute": {{Name: "/escaped", Typeflag: tar.TypeReg, Mode: 0o644}},
		"symlink": {
			{Name: "./link", Typeflag: tar.TypeSymlink, Linkname: outside},
			{Name: "./link/escaped", Typeflag: tar.TypeReg, Mode: 0o644},
		},
		"hardlink": {{Name: "./h", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}},
		"device":   {{Name: "./dev", Typeflag: tar.TypeChar, Mode: 0o644}},
	} {
		d := deb{name: "evil", version: "1", files: files, data: map[string]string{}}
		p := filepath.Join(t.TempDir(), "evil.deb")
		if err := os.WriteFile(p, d.build(t), 0o644); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(t.TempDir(), "x")
		if err := Extract(p, target); err == nil {
			t.Errorf("%s: extracted", name)
		}
		if left, _ := os.ReadDir(outside); len(left) > 0 {
			t.Errorf("%s: wrote %v outside", name, left)
		}
		if _, err := os.Lstat(filepath.Join(filepath.Dir(target), "escaped")); err == nil {
			t.Errorf("%s: wrote beside the target", name)
		}
	}
}

func TestReadArRejects(t *testing.T) {
	for _, b := range []string{"", "!<arch>", "!<arch>\nshort", "!<arch>\n" + fmt.Sprintf("%-16s%-12d%-6d%-6d%-8s%-10s`\n", "x", 0, 0, 0, "100644", "-1")} {
		if err := ReadAr(strings.NewReader(b), func(ArMember, io.Reader) error { return nil }); err == nil && b != "" {
			t.Errorf("accepted %q", b)
		}
	}
}
