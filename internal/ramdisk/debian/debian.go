// Package debian is the Debian archive client of the ramdisk build: it
// fetches a suite's InRelease from a mirror over HTTP(S), verifies its
// OpenPGP signature against Debian's archive keys carried in this
// package, reads the package and contents indexes the verified file
// lists (checking their SHA256), picks a package's highest version
// across suites, downloads the .deb (checking the SHA256 the index
// gives) and unpacks it in Go. It needs no apt, dpkg or xz on the host
// and never reads or changes the host's apt configuration.
//
// Everything fetched is kept below the client's cache directory, named
// by its digest and verified again on every use; InRelease files are
// fetched again after MaxAge. Parallel builds (processes too) share the
// cache through file locks.
package debian

import (
	"bufio"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/klauspost/compress/gzip"
	"github.com/ulikunitz/xz"
)

// Default mirrors: Debian's own redirectors, for a host without Debian
// sources of its own.
const (
	DefaultArchive  = "http://deb.debian.org/debian"
	DefaultSecurity = "http://security.debian.org/debian-security"
)

// Mirrors are the archives packages come from: the security archive for
// suites ending in -security, the main archive for the others.
type Mirrors struct {
	Archive  string // e.g. the base URL holding dists/ and pool/ of trixie
	Security string // the same for trixie-security
	// IgnoreValidUntil takes suites whose InRelease has expired (see
	// Release.Expired): for a frozen mirror, such as a snapshot.
	IgnoreValidUntil bool
}

// For returns the mirror of suite.
func (m Mirrors) For(suite string) string {
	if strings.HasSuffix(suite, "-security") {
		return m.Security
	}
	return m.Archive
}

// Check says whether both mirrors are http or https URLs.
func (m Mirrors) Check() error {
	for _, u := range []struct{ what, url string }{{"mirror", m.Archive}, {"security mirror", m.Security}} {
		p, err := url.Parse(u.url)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("debian: %s %q is not an http:// or https:// URL", u.what, u.url)
		}
	}
	return nil
}

// Client fetches from a Debian archive; see the package comment.
type Client struct {
	Mirrors Mirrors
	Arch    string // Debian architecture of the binary packages, e.g. amd64
	// Cache holds the fetched files; created when missing.
	Cache string
	// Keyring verifies InRelease files; nil is Debian's archive keys.
	Keyring openpgp.KeyRing
	// HTTP does the requests; nil is a client with the environment's
	// proxy settings.
	HTTP *http.Client
	// MaxAge is how long a fetched InRelease is used before it is
	// fetched again (0: a day), so a build picks up a new upload and the
	// builds of one test run all take the same packages.
	MaxAge time.Duration
	// Now is the clock signatures and Valid-Until are checked against
	// (nil: time.Now).
	Now func() time.Time
}

// Package is one binary package of an index.
type Package struct {
	Name, Version, Architecture string
	Source                      string `json:",omitempty"` // the source package (Name when the index names none)
	Suite                       string // the suite whose index listed it
	Filename                    string // in the archive, e.g. pool/main/l/linux/linux-image-...deb
	URL                         string
	Size                        int64
	SHA256                      string
	Depends, PreDepends         string `json:"-"`
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// fresh is r.Expired unless the mirrors allow expired suites.
func (c *Client) fresh(r *Release) error {
	if c.Mirrors.IgnoreValidUntil {
		return nil
	}
	return r.Expired(c.now())
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}
}

func (c *Client) keyring() (openpgp.KeyRing, error) {
	if c.Keyring != nil {
		return c.Keyring, nil
	}
	return DebianKeyring()
}

// suiteURL is the URL of file (relative to the suite's directory) of
// suite on its mirror.
func (c *Client) suiteURL(suite, file string) string {
	return strings.TrimSuffix(c.Mirrors.For(suite), "/") + "/dists/" + suite + "/" + file
}

// mirrorDir names a mirror's directory in the cache.
func mirrorDir(u string) string {
	u = strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ':' || r == '@' || r == '?' || r == '#' {
			return '_'
		}
		return r
	}, strings.Trim(u, "/"))
}

// Release returns suite's InRelease, verified: the cached copy when
// younger than MaxAge, else fetched anew.
func (c *Client) Release(ctx context.Context, suite string) (*Release, error) {
	kr, u, p, err := c.inRelease(suite)
	if err != nil {
		return nil, err
	}
	maxAge := c.MaxAge
	if maxAge == 0 {
		maxAge = 24 * time.Hour
	}
	if st, err := os.Stat(p); err == nil && c.now().Sub(st.ModTime()) < maxAge {
		if b, err := os.ReadFile(p); err == nil {
			if r, err := ParseInRelease(b, kr, suite, u, c.now()); err == nil && c.fresh(r) == nil {
				r.cached = true
				return r, nil
			}
		}
	}
	return c.fetchRelease(ctx, suite)
}

// inRelease returns the keyring that verifies suite's InRelease, its URL
// and its path in the cache.
func (c *Client) inRelease(suite string) (openpgp.KeyRing, string, string, error) {
	kr, err := c.keyring()
	if err != nil {
		return nil, "", "", err
	}
	return kr, c.suiteURL(suite, "InRelease"), filepath.Join(c.Cache, "dists", mirrorDir(c.Mirrors.For(suite)), suite, "InRelease"), nil
}

// fetchRelease fetches suite's InRelease from the mirror, verifies it
// and caches it.
func (c *Client) fetchRelease(ctx context.Context, suite string) (*Release, error) {
	kr, u, p, err := c.inRelease(suite)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("debian: %w", err)
	}
	unlock, err := cachedir.Lock(ctx, p+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	b, err := c.get(ctx, u, 16<<20)
	if err != nil {
		return nil, fmt.Errorf("debian: suite %s: %w", suite, err)
	}
	r, err := ParseInRelease(b, kr, suite, u, c.now())
	if err != nil {
		return nil, err
	}
	if err := c.fresh(r); err != nil {
		return nil, err
	}
	if err := writeFile(p, b); err != nil {
		return nil, err
	}
	return r, nil
}

// get reads u whole (up to limit bytes).
func (c *Client) get(ctx context.Context, u string, limit int64) ([]byte, error) {
	body, err := c.open(ctx, u)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w (is the mirror reachable? pick another with -mirror/-security-mirror)", u, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", u, limit)
	}
	return b, nil
}

// open starts a GET of u.
func (c *Client) open(ctx context.Context, u string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("mirror unreachable: %w (check the URL, the network and the proxy settings, or pick another mirror with -mirror/-security-mirror)", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, &StatusError{URL: u, Status: resp.Status, Code: resp.StatusCode}
	}
	return resp.Body, nil
}

// StatusError is a mirror's answer other than 200 OK.
type StatusError struct {
	URL, Status string
	Code        int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: %s (does the mirror carry this suite and architecture?)", e.URL, e.Status)
}

// fetchFile returns the cached path of the file ref of suite's
// directory, named by its digest (below by-hash/), downloading it when
// absent and verifying the digest whether cached or not. A download goes
// to a temporary file renamed into place once verified, so a cached file
// is always whole.
func (c *Client) fetchFile(ctx context.Context, u, sum string, size int64, name string, what string) (string, error) {
	sum = strings.ToLower(sum)
	if len(sum) != 64 {
		return "", fmt.Errorf("debian: %s: SHA256 %q is not 64 hex digits", what, sum)
	}
	p := filepath.Join(c.Cache, "by-hash", sum[:2], sum+"-"+name)
	if got, err := cachedir.FileSHA256(p); err == nil && got == sum {
		return p, nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", fmt.Errorf("debian: %w", err)
	}
	unlock, err := cachedir.Lock(ctx, p+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	defer os.Remove(p + ".lock")
	if got, err := cachedir.FileSHA256(p); err == nil && got == sum {
		return p, nil
	}
	body, err := c.open(ctx, u)
	if err != nil {
		return "", fmt.Errorf("debian: %s: %w", what, err)
	}
	defer body.Close()
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return "", fmt.Errorf("debian: %w", err)
	}
	defer os.Remove(f.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(body, size+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("debian: %s: %s: %w (is the mirror reachable?)", what, u, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != sum || (size >= 0 && n != size) {
		return "", &DigestError{What: what, URL: u, Want: sum, Got: got, WantSize: size, GotSize: n}
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return "", fmt.Errorf("debian: %w", err)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return "", fmt.Errorf("debian: %w", err)
	}
	return p, nil
}

// DigestError is a download whose bytes differ from what the signed
// indexes say.
type DigestError struct {
	What, URL         string
	Want, Got         string
	WantSize, GotSize int64
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("debian: %s: %s has SHA256 %s (%d bytes), the archive's index says %s (%d bytes): the mirror serves other bytes (damaged, out of sync, or tampered with); retry, or pick another mirror", e.What, e.URL, e.Got, e.GotSize, e.Want, e.WantSize)
}

// byHashPath is where a suite whose InRelease says Acquire-By-Hash keeps
// the index ref under its SHA256: by-hash/SHA256/<digest> in the index's
// directory.
func byHashPath(ref FileRef) string {
	return path.Join(path.Dir(ref.Path), "by-hash", "SHA256", ref.SHA256)
}

// indexReader opens the index file base (e.g.
// "main/binary-amd64/Packages") of suite, verified and decompressed.
func (c *Client) indexReader(ctx context.Context, rel *Release, base string) (io.ReadCloser, string, error) {
	ref, err := rel.Index(base)
	if err != nil {
		return nil, "", err
	}
	u := c.suiteURL(rel.Suite, ref.Path)
	p, err := c.fetchFile(ctx, u, ref.SHA256, ref.Size, strings.ReplaceAll(rel.Suite+"_"+ref.Path, "/", "_"), "suite "+rel.Suite+" index "+ref.Path)
	var digestErr *DigestError
	var statusErr *StatusError
	if err != nil && rel.cached && (errors.As(err, &digestErr) || errors.As(err, &statusErr) && statusErr.Code == http.StatusNotFound) {
		// The mirror has published the suite again since the cached
		// InRelease was fetched (backports and updates do, several times
		// a day): its indexes now have other digests, or are gone. Take
		// the current InRelease once and read the index it names.
		fresh, ferr := c.fetchRelease(ctx, rel.Suite)
		if ferr != nil {
			return nil, "", fmt.Errorf("%w; fetching the suite's current InRelease: %w", err, ferr)
		}
		*rel = *fresh
		if ref, err = rel.Index(base); err != nil {
			return nil, "", err
		}
		u = c.suiteURL(rel.Suite, ref.Path)
		p, err = c.fetchFile(ctx, u, ref.SHA256, ref.Size, strings.ReplaceAll(rel.Suite+"_"+ref.Path, "/", "_"), "suite "+rel.Suite+" index "+ref.Path)
	}
	if err != nil && rel.Fields.Get("Acquire-By-Hash") == "yes" && (errors.As(err, &digestErr) || errors.As(err, &statusErr) && statusErr.Code == http.StatusNotFound) {
		// The suite keeps its indexes under their digests too, as apt
		// fetches them: the copy the InRelease names outlives the next
		// publication of the file under its own name.
		bu := c.suiteURL(rel.Suite, byHashPath(ref))
		var berr error
		p, berr = c.fetchFile(ctx, bu, ref.SHA256, ref.Size, strings.ReplaceAll(rel.Suite+"_"+ref.Path, "/", "_"), "suite "+rel.Suite+" index "+ref.Path+" by hash")
		if berr == nil {
			err = nil
		} else {
			if errors.As(berr, &statusErr) {
				berr = fmt.Errorf("%s", statusErr.Status)
			}
			err = fmt.Errorf("%w; its copy by hash, %s: %v: the mirror's InRelease (%s, dated %s) names an index the mirror does not serve: the mirror is out of sync; retry later, or pick another mirror",
				err, bu, berr, rel.URL, rel.Fields.Get("Date"))
		}
	}
	if err != nil {
		return nil, "", err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, "", fmt.Errorf("debian: %w", err)
	}
	// The XZ reader reads a byte at a time.
	var r io.Reader = bufio.NewReaderSize(f, 1<<20)
	switch {
	case strings.HasSuffix(ref.Path, ".gz"):
		zr, err := gzip.NewReader(r)
		if err != nil {
			f.Close()
			return nil, "", fmt.Errorf("debian: %s: %w", u, err)
		}
		r = zr
	case strings.HasSuffix(ref.Path, ".xz"):
		zr, err := xz.NewReader(r)
		if err != nil {
			f.Close()
			return nil, "", fmt.Errorf("debian: %s: %w", u, err)
		}
		r = zr
	}
	return readCloser{r, f}, u, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Index is the packages of several suites.
type Index struct {
	Suites []string
	Arch   string
	pkgs   map[string][]Package
}

// Packages reads the Packages indexes of components (e.g. main,
// non-free-firmware) of suites for the client's architecture.
func (c *Client) Packages(ctx context.Context, suites, components []string) (*Index, error) {
	if c.Arch == "" {
		return nil, errors.New("debian: no architecture")
	}
	ix := &Index{Suites: suites, Arch: c.Arch, pkgs: map[string][]Package{}}
	for _, suite := range suites {
		rel, err := c.Release(ctx, suite)
		if err != nil {
			return nil, err
		}
		for _, comp := range components {
			r, u, err := c.indexReader(ctx, rel, comp+"/binary-"+c.Arch+"/Packages")
			if err != nil {
				return nil, err
			}
			err = ReadPackages(r, u, func(p Package) {
				p.Suite = suite
				p.URL = strings.TrimSuffix(c.Mirrors.For(suite), "/") + "/" + p.Filename
				ix.pkgs[p.Name] = append(ix.pkgs[p.Name], p)
			})
			r.Close()
			if err != nil {
				return nil, fmt.Errorf("debian: %w", err)
			}
		}
	}
	return ix, nil
}

// packageFields are the fields of a Packages entry Package records, as
// Debian's archive spells them.
var packageFields = map[string]bool{"Package": true, "Version": true, "Architecture": true, "Source": true,
	"Filename": true, "SHA256": true, "Size": true, "Depends": true, "Pre-Depends": true}

// ReadPackages calls fn for every entry of a Packages index (where names
// it in errors). An entry without Package, Version, Filename or a valid
// SHA256 is an error.
func ReadPackages(r io.Reader, where string, fn func(Package)) error {
	return readStanzas(r, where, packageFields, func(s Stanza) error {
		p := Package{Name: s.Get("Package"), Version: s.Get("Version"), Architecture: s.Get("Architecture"),
			Source: s.Get("Source"), Filename: s.Get("Filename"), SHA256: strings.ToLower(s.Get("SHA256")),
			Depends: s.Get("Depends"), PreDepends: s.Get("Pre-Depends")}
		if p.Name == "" || p.Version == "" || p.Filename == "" {
			return fmt.Errorf("%s: entry %q lacks Package, Version or Filename", where, p.Name)
		}
		if _, err := hex.DecodeString(p.SHA256); err != nil || len(p.SHA256) != 64 {
			return fmt.Errorf("%s: package %s %s: SHA256 %q is not 64 hex digits", where, p.Name, p.Version, p.SHA256)
		}
		if !path.IsAbs(p.Filename) && !strings.Contains("/"+p.Filename+"/", "/../") {
			// A relative path within the mirror, as Debian writes them.
		} else {
			return fmt.Errorf("%s: package %s %s: Filename %q leaves the mirror", where, p.Name, p.Version, p.Filename)
		}
		size, err := strconv.ParseInt(s.Get("Size"), 10, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("%s: package %s %s: Size %q", where, p.Name, p.Version, s.Get("Size"))
		}
		p.Size = size
		// "src (version)" when the source version differs.
		p.Source, _, _ = strings.Cut(p.Source, " ")
		if p.Source == "" {
			p.Source = p.Name
		}
		fn(p)
		return nil
	})
}

// Lookup returns the highest version of package name across the
// index's suites (the first suite's on a tie).
func (ix *Index) Lookup(name string) (Package, bool) {
	var best Package
	found := false
	for _, p := range ix.pkgs[name] {
		if !found || CompareVersions(p.Version, best.Version) > 0 {
			best, found = p, true
		}
	}
	return best, found
}

// Get is Lookup with an error naming the suites searched.
func (ix *Index) Get(name string) (Package, error) {
	if p, ok := ix.Lookup(name); ok {
		return p, nil
	}
	return Package{}, fmt.Errorf("debian: package %s (%s) is in none of the suites %s: check the name, or the flavour's suites", name, ix.Arch, strings.Join(ix.Suites, ", "))
}

// Download returns the path of p's .deb in the cache (below by-hash/,
// named by its SHA256), fetched from p.URL when absent, and verified
// against p.SHA256 either way.
func (c *Client) Download(ctx context.Context, p Package) (string, error) {
	return c.fetchFile(ctx, p.URL, p.SHA256, p.Size, path.Base(p.Filename), "package "+p.Name+" "+p.Version)
}

// Contents returns, for each of suites whose InRelease lists one, a
// reader of the Contents index of component for arch ("all": the
// architecture-independent packages), verified and decompressed; the
// caller closes each. A suite without one is skipped (the security
// archive publishes none); none at all is an error.
func (c *Client) Contents(ctx context.Context, suites []string, component, arch string) ([]io.ReadCloser, error) {
	var out []io.ReadCloser
	fail := func(err error) ([]io.ReadCloser, error) {
		for _, r := range out {
			r.Close()
		}
		return nil, err
	}
	for _, suite := range suites {
		rel, err := c.Release(ctx, suite)
		if err != nil {
			return fail(err)
		}
		if _, err := rel.Index(component + "/Contents-" + arch); err != nil {
			continue
		}
		r, _, err := c.indexReader(ctx, rel, component+"/Contents-"+arch)
		if err != nil {
			return fail(err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("debian: no suite of %s lists %s/Contents-%s: %w", strings.Join(suites, ", "), component, arch, ErrNoContents)
	}
	return out, nil
}

// ErrNoContents is Contents' error when none of the suites publishes the
// index asked for.
var ErrNoContents = errors.New("no such Contents index")

// writeFile writes b to p through a temporary file renamed into place.
func writeFile(p string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("debian: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		return fmt.Errorf("debian: %w", err)
	}
	return nil
}
