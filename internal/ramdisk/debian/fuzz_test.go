package debian

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
)

// FuzzReadPackages feeds Packages indexes (a mirror's bytes): no panic,
// and every package it returns has the fields the build relies on.
func FuzzReadPackages(f *testing.F) {
	f.Add(packagesText)
	f.Add("Package: a\nVersion: 1\nFilename: a.deb\nSize: 1\nSHA256: " + strings.Repeat("ab", 32) + "\n\n\n")
	f.Add("Package: a\n continued\n#comment\nVersion:1\n")
	f.Fuzz(func(t *testing.T, s string) {
		_ = ReadPackages(strings.NewReader(s), "fuzz", func(p Package) {
			if p.Name == "" || p.Version == "" || p.Filename == "" || len(p.SHA256) != 64 || p.Size < 0 {
				t.Errorf("incomplete package %+v", p)
			}
		})
	})
}

// FuzzParseInRelease feeds InRelease files: no panic, and nothing is
// accepted without a good signature by the keyring (an empty one here).
func FuzzParseInRelease(f *testing.F) {
	f.Add([]byte("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nSuite: trixie\nSHA256:\n " + strings.Repeat("0", 64) + " 1 main/binary-amd64/Packages\n-----BEGIN PGP SIGNATURE-----\n\niQ==\n-----END PGP SIGNATURE-----\n"))
	f.Add([]byte("Suite: trixie\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := ParseInRelease(b, openpgp.EntityList{}, "s", "u", time.Now()); err == nil {
			t.Errorf("accepted without a key: %q", b)
		}
	})
}

// FuzzReadStanzas feeds control files: no panic, and no field has an
// empty name.
func FuzzReadStanzas(f *testing.F) {
	f.Add("Suite: trixie\nSHA256:\n 00 1 a\n\nPackage: b\n")
	f.Add(" x\n")
	f.Fuzz(func(t *testing.T, s string) {
		_ = ReadStanzas(strings.NewReader(s), "fuzz", func(st Stanza) error {
			for k := range st {
				if k == "" {
					t.Errorf("empty field name in %q", s)
				}
			}
			return nil
		})
	})
}

// FuzzReadAr feeds ar archives (a .deb's outer format): no panic, and
// members never claim more bytes than were given.
func FuzzReadAr(f *testing.F) {
	f.Add([]byte("!<arch>\ndebian-binary   0           0     0     100644  4         `\n2.0\n"))
	f.Add([]byte("!<arch>\nx               0           0     0     100644  3         `\nabc\n"))
	f.Add([]byte("!<arch>\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = ReadAr(bytes.NewReader(b), func(m ArMember, r io.Reader) error {
			n, _ := io.Copy(io.Discard, r)
			if n > int64(len(b)) || m.Size < 0 {
				t.Errorf("member %+v read %d bytes of %d", m, n, len(b))
			}
			return nil
		})
	})
}

// FuzzParseDepends feeds Depends fields: names only, never empty, never
// with a separator or version in them.
func FuzzParseDepends(f *testing.F) {
	f.Add("uuid-runtime, libc6 (>= 2.34), libjson-c5 (>= 0.15) | libjson-c4, python3:any")
	f.Add("zlib1g (>= 1:1.1.4) [amd64] <!nocheck>")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		for _, d := range ParseDepends(s) {
			if d == "" || strings.ContainsAny(d, ",|([<:") {
				t.Errorf("ParseDepends(%q) gave %q", s, d)
			}
		}
	})
}

// FuzzCompareVersions checks the order is antisymmetric and reflexive on
// any input.
func FuzzCompareVersions(f *testing.F) {
	f.Add("1:2.0~rc1-1", "2.0-1")
	f.Add("", "0")
	f.Fuzz(func(t *testing.T, a, b string) {
		if CompareVersions(a, a) != 0 {
			t.Errorf("%q != itself", a)
		}
		if signOf(CompareVersions(a, b)) != -signOf(CompareVersions(b, a)) {
			t.Errorf("%q vs %q is not antisymmetric", a, b)
		}
	})
}
