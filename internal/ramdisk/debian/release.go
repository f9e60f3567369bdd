package debian

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// keyFiles are Debian's archive signing keys (the public keyrings of
// Debian's debian-archive-keyring package) for the releases the ramdisk
// is built from: the automatic keys sign every suite of the archive
// (bookworm's and trixie's sign bookworm, trixie, forky and their
// -updates and -backports), the security keys the -security suites, the
// stable release keys the stable releases.
//
//go:embed keys/*.gpg
var keyFiles embed.FS

// DebianKeyring returns Debian's archive keys (keyFiles).
func DebianKeyring() (openpgp.EntityList, error) {
	var out openpgp.EntityList
	err := fs.WalkDir(keyFiles, "keys", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := keyFiles.ReadFile(p)
		if err != nil {
			return err
		}
		l, err := openpgp.ReadKeyRing(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, l...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("debian: archive keys: %w", err)
	}
	return out, nil
}

// FileRef is an index file a Release file lists.
type FileRef struct {
	Path   string // relative to the suite's directory, e.g. main/binary-amd64/Packages.xz
	Size   int64
	SHA256 string
}

// Release is a suite's verified InRelease file.
type Release struct {
	Suite, URL string // the suite as asked for, and where its InRelease is
	Fields     Stanza
	Files      map[string]FileRef // by Path, from the SHA256 field
	ValidUntil time.Time          // zero when the file sets none
	cached     bool               // read from the cache, not the mirror, in this run
}

// ErrSignature is wrapped by every error of an InRelease whose signature
// does not verify.
var ErrSignature = errors.New("signature does not verify")

// ParseInRelease verifies the clear-signed InRelease data against
// keyring (one good signature by a key of it is enough, as apt's gpgv)
// at time now and parses the signed text. Only the signed text is read:
// whatever surrounds the signed block is ignored. Valid-Until is parsed,
// not checked: see Release.Expired.
func ParseInRelease(data []byte, keyring openpgp.KeyRing, suite, url string, now time.Time) (*Release, error) {
	b, _ := clearsign.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("debian: suite %s: %s is not a clear-signed file: %w", suite, url, ErrSignature)
	}
	cfg := &packet.Config{Time: func() time.Time { return now }}
	if _, err := b.VerifySignature(keyring, cfg); err != nil {
		return nil, fmt.Errorf("debian: suite %s: %s: %w: %v (the mirror serves a damaged or forged file, or the archive is signed by a key this build does not carry: see internal/ramdisk/debian/keys)", suite, url, ErrSignature, err)
	}
	r := &Release{Suite: suite, URL: url, Files: map[string]FileRef{}}
	err := ReadStanzas(bytes.NewReader(b.Plaintext), url, func(s Stanza) error {
		if r.Fields != nil {
			return fmt.Errorf("%s: more than one paragraph", url)
		}
		r.Fields = s
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("debian: suite %s: %w", suite, err)
	}
	if r.Fields == nil {
		return nil, fmt.Errorf("debian: suite %s: %s: empty", suite, url)
	}
	if v := r.Fields.Get("Valid-Until"); v != "" {
		t, err := time.Parse(time.RFC1123, strings.Replace(v, "UTC", "GMT", 1))
		if err != nil {
			return nil, fmt.Errorf("debian: suite %s: %s: Valid-Until %q: %w", suite, url, v, err)
		}
		r.ValidUntil = t
	}
	for line := range strings.SplitSeq(r.Fields.Get("SHA256"), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var size int64
		var err error
		if len(f) == 3 {
			size, err = strconv.ParseInt(f[1], 10, 64)
		}
		if len(f) != 3 || err != nil || size < 0 || len(f[0]) != 64 {
			return nil, fmt.Errorf("debian: suite %s: %s: SHA256 line %q is not \"digest size path\"", suite, url, line)
		}
		r.Files[f[2]] = FileRef{Path: f[2], Size: size, SHA256: strings.ToLower(f[0])}
	}
	if len(r.Files) == 0 {
		return nil, fmt.Errorf("debian: suite %s: %s lists no SHA256 digests", suite, url)
	}
	return r, nil
}

// Expired fails when the file's Valid-Until (set by the security archive
// and testing) has passed at now: a mirror serving a stale suite, which
// apt refuses too unless told otherwise (Acquire::Check-Valid-Until).
func (r *Release) Expired(now time.Time) error {
	if !r.ValidUntil.IsZero() && now.After(r.ValidUntil) {
		return fmt.Errorf("debian: suite %s: %s expired at %s (Valid-Until): the mirror is not up to date; pick another, or, for a frozen mirror (a snapshot), allow expired suites (mkramdisk -ignore-valid-until)",
			r.Suite, r.URL, r.ValidUntil.Format(time.RFC1123))
	}
	return nil
}

// Index returns the best-compressed form of the index file base (e.g.
// "main/binary-amd64/Packages") this Go code reads: .gz (fastest to
// read), else .xz, else the file itself.
func (r *Release) Index(base string) (FileRef, error) {
	for _, ext := range []string{".gz", ".xz", ""} {
		if f, ok := r.Files[base+ext]; ok {
			return f, nil
		}
	}
	return FileRef{}, fmt.Errorf("debian: suite %s: %s lists no %s(.gz|.xz)", r.Suite, r.URL, base)
}
