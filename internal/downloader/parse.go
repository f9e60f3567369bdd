package downloader

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// ParseSHA256 reads a checksum file in sha256sum's format ("<hex>  <name>"
// or "<hex> *<name>" per line, or one bare hex digest) and returns the
// digest recorded for name: the line naming it, else the only line when
// that line names no file. Outside bytes: a server's .sha256.
func ParseSHA256(data []byte, name string) (string, error) {
	if len(data) > 1<<20 {
		return "", fmt.Errorf("checksum file of %d bytes: more than a checksum file holds", len(data))
	}
	type entry struct{ sum, file string }
	var entries []entry
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		sum, file, _ := strings.Cut(line, " ")
		file = strings.TrimPrefix(strings.TrimLeft(file, " "), "*")
		if len(sum) != 64 {
			return "", fmt.Errorf("line %d: %q is not a SHA-256 digest (64 hex digits)", n+1, truncate(sum))
		}
		if _, err := hex.DecodeString(sum); err != nil {
			return "", fmt.Errorf("line %d: %q is not a SHA-256 digest: %v", n+1, truncate(sum), err)
		}
		entries = append(entries, entry{strings.ToLower(sum), file})
	}
	for _, e := range entries {
		if e.file != "" && path.Base(e.file) == name {
			return e.sum, nil
		}
	}
	if len(entries) == 1 && entries[0].file == "" {
		return entries[0].sum, nil
	}
	if len(entries) == 0 {
		return "", errors.New("no digest in the checksum file")
	}
	return "", fmt.Errorf("no line for %s among the %d digests of the checksum file", name, len(entries))
}

// ETag returns the value of the last ETag header in a header dump (curl's
// --dump-header, or what this program writes), quotes included, or "".
// Outside bytes: a file on the shared volume, or CACHEURL's .headers.
func ETag(headers []byte) string {
	etag := ""
	sc := bufio.NewScanner(bytes.NewReader(headers))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "etag") {
			etag = strings.TrimSpace(value)
		}
	}
	return etag
}

// CacheTag is an ETag as a part of a directory name: get-resource.sh takes
// the quotes off; anything that is not a plain file-name character (W/ of
// a weak tag, or worse) becomes "_", so a tag never names another path.
func CacheTag(etag string) string {
	etag = strings.ReplaceAll(etag, `"`, "")
	var b strings.Builder
	for _, r := range etag {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_', r == '+', r == '=':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 128 {
		s = s[:128]
	}
	return s
}

// Member is a regular file wanted from a tarball and where it goes.
type Member struct {
	Name string                    // the name at the tarball's top level (a leading ./ is accepted)
	Open func() (io.Writer, error) // where its bytes go, opened when it is found
}

// Extract copies the wanted members of a tar archive (gzip, xz or zstd
// compressed, or plain, told by their magic bytes, as tar -xa does) and
// fails naming the first one it does not hold. Other entries are skipped,
// never written. Outside bytes: the downloaded tarball.
func Extract(r io.Reader, wanted []Member) error {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(6)
	var src io.Reader = br
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		defer gz.Close()
		src = gz
	case bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		x, err := xz.NewReader(br)
		if err != nil {
			return fmt.Errorf("xz: %w", err)
		}
		src = x
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		z, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
		defer z.Close()
		src = z
	}
	found := map[string]bool{}
	tr := tar.NewReader(src)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		for _, m := range wanted {
			if name != m.Name {
				continue
			}
			if h.Typeflag != tar.TypeReg {
				return fmt.Errorf("%s: a %s entry, not a regular file", h.Name, typeName(h.Typeflag))
			}
			if found[name] {
				return fmt.Errorf("%s: twice in the archive", h.Name)
			}
			found[name] = true
			w, err := m.Open()
			if err != nil {
				return err
			}
			if _, err := io.Copy(w, tr); err != nil {
				return fmt.Errorf("%s: %w", h.Name, err)
			}
		}
	}
	var missing []string
	for _, m := range wanted {
		if !found[m.Name] {
			missing = append(missing, m.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the archive holds no %s at its top level", strings.Join(missing, " nor "))
	}
	return nil
}

func typeName(t byte) string {
	switch t {
	case tar.TypeDir:
		return "directory"
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	}
	return fmt.Sprintf("type %q", t)
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
