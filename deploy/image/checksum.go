package image

import (
	"context"
	"crypto/fips140"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"path"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/fastsha2"
	"github.com/ironic-go/ironic-agent/internal/lazyregexp"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// Checksum is what an image is verified against.
type Checksum struct {
	Algorithm string // hashlib name: md5, sha256, sha512, ...
	Expected  string // compared with the lowercase hex digest, case-sensitively as IPA does
	Source    string // where Expected came from, for messages
}

// errMD5FIPS is MD5 asked for in FIPS mode: Go's validated module has no
// MD5, and FIPS 140-3 allows none for integrity.
var errMD5FIPS = errors.New("MD5 is not allowed in FIPS mode (fips=1 on the kernel command line): give the image a SHA-256 or SHA-512 checksum (os_hash_algo/os_hash_value)")

// newHash returns the hash for a hashlib algorithm name, or nil. In FIPS
// mode (crypto/fips140) SHA-2 is the standard library's validated
// implementation, not internal/fastsha2's assembly, and MD5 is nil:
// callers refuse it first with errMD5FIPS.
func newHash(algo string) hash.Hash {
	fips := fips140.Enabled()
	switch algo {
	case "md5":
		if fips {
			return nil
		}
		return md5.New()
	case "sha1":
		return sha1.New()
	case "sha224":
		return sha256.New224()
	case "sha256":
		// Ironic's default os_hash_algo; on CPUs without AVX2, QEMU's
		// qemu64 among them, crypto/sha256's generic code halved the
		// image write's speed (docs/testing.md: IPA side by side).
		if fips {
			return sha256.New()
		}
		return fastsha2.New256()
	case "sha384":
		return sha512.New384()
	case "sha512":
		// Glance's default os_hash_algo, which Ironic passes on.
		if fips {
			return sha512.New()
		}
		return fastsha2.New512()
	case "sha3_224":
		return sha3.New224()
	case "sha3_256":
		return sha3.New256()
	case "sha3_384":
		return sha3.New384()
	case "sha3_512":
		return sha3.New512()
	}
	return nil
}

// hashImplementation names the code newHash(algo) runs, for the write's
// stage times.
func hashImplementation(algo string) string {
	if fips140.Enabled() {
		return "crypto (FIPS 140-3 mode)"
	}
	switch algo {
	case "sha256":
		return fastsha2.Implementation256()
	case "sha512":
		return fastsha2.Implementation512()
	}
	return ""
}

// algorithmByLength picks SHA-2 by digest length as IPA does; 32
// characters mean MD5 only when MD5 is enabled.
func algorithmByLength(digest string, md5Enabled bool) (string, error) {
	switch len(digest) {
	case 128:
		return "sha512", nil
	case 64:
		return "sha256", nil
	case 32:
		if fips140.Enabled() {
			return "", errMD5FIPS
		}
		if !md5Enabled {
			return "", errors.New("MD5 checksums are disabled (md5_enabled is false); provide a SHA-2 checksum or os_hash_algo/os_hash_value")
		}
		return "md5", nil
	}
	return "", ipaError("Unable to identify checksum algorithm used, and a value is not specified in the os_hash_algo setting.")
}

// ParseChecksum parses an operator's "ALGO:HEX" or bare "HEX" (algorithm by
// length), as the write-image command takes it.
func ParseChecksum(s string) (Checksum, error) {
	algo, hexv, ok := strings.Cut(s, ":")
	if !ok {
		hexv = s
		a, err := algorithmByLength(hexv, true)
		if err != nil {
			return Checksum{}, err
		}
		algo = a
	}
	algo = strings.ToLower(strings.ReplaceAll(algo, "-", ""))
	if algo == "md5" && fips140.Enabled() {
		return Checksum{}, errMD5FIPS
	}
	if newHash(algo) == nil {
		return Checksum{}, fmt.Errorf("unsupported checksum algorithm %q", algo)
	}
	if !isHex(hexv) || len(hexv) != 2*newHash(algo).Size() {
		return Checksum{}, fmt.Errorf("%s checksum must be %d hex characters, got %q", algo, 2*newHash(algo).Size(), hexv)
	}
	return Checksum{Algorithm: algo, Expected: strings.ToLower(hexv), Source: "command line"}, nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return s != ""
}

// resolveChecksum chooses algorithm and expected value in IPA's order:
// os_hash_algo when this agent supports it, else a checksum URL (fetched),
// else a checksum digest (algorithm by length).
func resolveChecksum(ctx context.Context, info *ImageInfo, o *DownloadOptions, md5Enabled bool) (Checksum, error) {
	algo := info.OSHashAlgo
	if algo == "md5" && fips140.Enabled() {
		return Checksum{}, ipaError(errMD5FIPS.Error())
	}
	switch {
	case algo != "" && newHash(algo) != nil:
		c := Checksum{Algorithm: algo, Expected: info.OSHashValue, Source: "os_hash_value"}
		if isChecksumURL(c.Expected) {
			v, err := fetchChecksum(ctx, o, c.Expected, info.URLs[0])
			if err != nil {
				return Checksum{}, err
			}
			c.Expected, c.Source = v, c.Expected
		}
		return c, nil
	case info.Checksum != "" && isChecksumURL(info.Checksum):
		v, err := fetchChecksum(ctx, o, info.Checksum, info.URLs[0])
		if err != nil {
			return Checksum{}, err
		}
		c := Checksum{Algorithm: algo, Expected: v, Source: info.Checksum}
		if algo == "" || newHash(algo) == nil {
			a, err := algorithmByLength(v, md5Enabled)
			if err != nil {
				return Checksum{}, ipaerror.Generic(fmt.Sprintf("Unable to proceed with image %s as the checksum indicator has been used but the algorithm could not be identified. Error: %v", info.ID, err))
			}
			c.Algorithm = a
		}
		return c, nil
	case info.Checksum != "":
		a, err := algorithmByLength(info.Checksum, md5Enabled)
		if err != nil {
			return Checksum{}, ipaerror.Generic(fmt.Sprintf("Unable to proceed with image %s as the checksum indicator has been used but the algorithm could not be identified. Error: %v", info.ID, err))
		}
		return Checksum{Algorithm: a, Expected: info.Checksum, Source: "checksum"}, nil
	}
	return Checksum{}, ipaerror.Generic(fmt.Sprintf("Unable to verify image %s with available checksums. Please make sure the specified 'os_hash_algo' (currently %s) is supported by this ramdisk, or provide a md5 checksum via the 'checksum' field", info.ID, algo))
}

// maxChecksumFile bounds what is read of a checksum file: real ones list a
// few hundred images at most.
const maxChecksumFile = 4 << 20

func fetchChecksum(ctx context.Context, o *DownloadOptions, checksumURL, imageURL string) (string, error) {
	f, resp, cancel, err := openImage(ctx, o, []string{checksumURL})
	if err != nil {
		return "", errDownload(checksumURL, err)
	}
	defer cancel()
	defer resp.Body.Close()
	_ = f
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxChecksumFile))
	if err != nil {
		return "", errDownload(checksumURL, fmt.Errorf("reading the checksum file: %w", err))
	}
	v, err := ParseChecksumFile(string(body), imageURL)
	if err != nil {
		return "", errDownload(checksumURL, err)
	}
	return v, nil
}

var (
	checksumOnly = lazyregexp.New(`^(?:[a-fA-F\d]{32}|[a-fA-F\d]{64}|[a-fA-F\d]{128})$`)
	// IPA's matchers in IPA's order: MD5, SHA-256, SHA-512, each at the
	// start then at the end of the line.
	checksumInLine = []*lazyregexp.Regexp{
		lazyregexp.New(`^([a-fA-F\d]{32})\s`), lazyregexp.New(`\s([a-fA-F\d]{32})$`),
		lazyregexp.New(`^([a-fA-F\d]{64})\s`), lazyregexp.New(`\s([a-fA-F\d]{64})$`),
		lazyregexp.New(`^([a-fA-F\d]{128})\s`), lazyregexp.New(`\s([a-fA-F\d]{128})$`),
	}
)

// ParseChecksumFile finds the checksum of the image at imageURL in a
// checksum file: a file holding only a digest, or GNU lines
// "<hash>  [*]<name>", or BSD lines "ALGO (<name>) = <hash>". The name is
// the basename of the image URL's path, as in IPA (which, unlike this,
// puts the name into its regular expression unescaped).
func ParseChecksumFile(body, imageURL string) (string, error) {
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "", ipaError("Empty checksum file")
	}
	if len(lines) == 1 && !strings.Contains(lines[0], " ") {
		if checksumOnly.MatchString(lines[0]) {
			return lines[0], nil
		}
		return "", ipaError(fmt.Sprintf("Invalid checksum file (No valid checksum found) [%q]", lines[0]))
	}
	name := ""
	if u, err := url.Parse(imageURL); err == nil {
		name = path.Base(u.Path)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "#") || !namesFile(l, name) {
			continue
		}
		for _, m := range checksumInLine {
			if s := m.FindStringSubmatch(l); s != nil {
				return s[1], nil
			}
		}
	}
	return "", ipaError("Checksum file does not contain name " + name)
}

// namesFile reports whether a checksum-file line names the file as IPA's
// two patterns do: GNU "\s[*]?<name>$" or BSD "\s(<name>)\s", the name
// taken literally.
func namesFile(line, name string) bool {
	if name == "" {
		return false
	}
	if rest, ok := strings.CutSuffix(line, name); ok {
		rest = strings.TrimSuffix(rest, "*")
		if rest != "" && isSpace(rest[len(rest)-1]) {
			return true
		}
	}
	p := "(" + name + ")"
	for i := 0; ; {
		j := strings.Index(line[i:], p)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(p)
		if j > 0 && isSpace(line[j-1]) && end < len(line) && isSpace(line[end]) {
			return true
		}
		i = j + 1
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// ipaError keeps IPA's wording (capitalised, with a full stop) for
// messages Ironic users will compare with IPA's.
func ipaError(msg string) error { return errors.New(msg) }
