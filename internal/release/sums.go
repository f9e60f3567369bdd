package release

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
)

// SumsName is the checksum list of a release directory.
const SumsName = "SHA256SUMS"

// sumLine is one line of sha256sum's output: the digest, two spaces (text
// mode, which sha256sum -c reads as binary on Linux), the name.
func sumLine(digest, name string) string { return digest + "  " + name + "\n" }

// WriteSidecar writes path.sha256 holding path's digest beside it, in
// sha256sum format with the file's base name, as IPA's published builds
// and the deployers that read them (Bifrost, OpenStack-Ansible) expect.
func WriteSidecar(path string) error {
	sum, err := cachedir.FileSHA256(path)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return writeAtomic(path+".sha256", []byte(sumLine(sum, filepath.Base(path))))
}

// WriteSums writes dir/SHA256SUMS: every regular file below dir but the
// list itself and hidden entries (the staging directories of a build in
// progress), by path relative to dir in byte order, in sha256sum format.
// A symbolic link or another kind of file fails: the list must cover
// the tree as served.
func WriteSums(dir string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
		case d.Type().IsRegular():
			if rel != SumsName {
				names = append(names, filepath.ToSlash(rel))
			}
		default:
			return fmt.Errorf("%s is not a regular file or a directory", p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("release: checksums of %s: %w", dir, err)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		sum, err := cachedir.FileSHA256(filepath.Join(dir, filepath.FromSlash(n)))
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		b.WriteString(sumLine(sum, n))
	}
	return writeAtomic(filepath.Join(dir, SumsName), []byte(b.String()))
}

// writeAtomic writes path through a temporary file beside it, so a reader
// never sees it half-written.
func writeAtomic(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("release: %w", err)
	}
	return nil
}
