// Package releasedir lays out a release directory with the names `make
// release` gives its files (the project's release conventions), from a
// kernel and an initramfs the test bed built: what an operator serves and
// points a deployer at. Tests serve it to Ironic as deploy_kernel and
// deploy_ramdisk URLs and parse its checksum files the way the deployers
// do; it is not the release build, only the same layout.
//
//	ironic-agent-<version>-<arch>.kernel        (+ .sha256)
//	ironic-agent-<version>-<arch>.initramfs     (+ .sha256)
//	dib/files/ipa-<flavour>-master.kernel       (+ .sha256)
//	dib/files/ipa-<flavour>-master.initramfs    (+ .sha256)
//	dib/ipa-<flavour>-master.tar.gz             (+ .sha256)
//	SHA256SUMS
//
// Each .sha256 is one sha256sum line, "<hex>  <basename>\n"; SHA256SUMS
// lists every other file of the tree by its relative path, sorted.
package releasedir

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
)

// Branch is the IPA branch name every release is published under: one
// agent serves every Ironic series.
const Branch = "master"

// Release is a laid out release directory.
type Release struct {
	Dir     string
	Version string
	Arch    string
	// Digests holds the SHA-256 of every file of the tree but
	// SHA256SUMS, by relative path (slash-separated).
	Digests map[string]string
}

// Flavour is the IPA flavour name of arch: goagent for amd64, as IPA's
// debian; goagent-<arch> for the others, as IPA's debian-arm64.
func Flavour(arch string) string {
	if arch == "amd64" {
		return "goagent"
	}
	return "goagent-" + arch
}

// Name is the versioned base name, ironic-agent-<version>-<arch>.
func (r *Release) Name() string { return "ironic-agent-" + r.Version + "-" + r.Arch }

// Kernel and Initramfs are the versioned files' relative paths.
func (r *Release) Kernel() string    { return r.Name() + ".kernel" }
func (r *Release) Initramfs() string { return r.Name() + ".initramfs" }

// IPAName is the IPA-layout base name, ipa-<flavour>-master.
func (r *Release) IPAName() string { return "ipa-" + Flavour(r.Arch) + "-" + Branch }

// IPAKernel, IPAInitramfs and IPATarball are the IPA-layout copies'
// relative paths.
func (r *Release) IPAKernel() string    { return "dib/files/" + r.IPAName() + ".kernel" }
func (r *Release) IPAInitramfs() string { return "dib/files/" + r.IPAName() + ".initramfs" }
func (r *Release) IPATarball() string   { return "dib/" + r.IPAName() + ".tar.gz" }

// Write lays out the release of version for arch in dir (created; it
// must not hold a release already) from the files kernel and initramfs.
// Every file gets the modification time mtime, as a release's files get
// the commit's.
func Write(dir, version, arch, kernel, initramfs string, mtime time.Time) (*Release, error) {
	if version == "" || strings.ContainsAny(version, "/ ") {
		return nil, fmt.Errorf("release directory %s: bad version %q: want a non-empty word without slashes", dir, version)
	}
	if arch != "amd64" && arch != "arm64" {
		return nil, fmt.Errorf("release directory %s: bad architecture %q: want amd64 or arm64", dir, arch)
	}
	r := &Release{Dir: dir, Version: version, Arch: arch, Digests: map[string]string{}}
	if _, err := os.Stat(filepath.Join(dir, "SHA256SUMS")); err == nil {
		return nil, fmt.Errorf("release directory %s already holds a release (SHA256SUMS exists)", dir)
	}
	for _, c := range []struct{ from, to string }{
		{kernel, r.Kernel()}, {initramfs, r.Initramfs()},
		{kernel, r.IPAKernel()}, {initramfs, r.IPAInitramfs()},
	} {
		if err := r.copy(c.from, c.to); err != nil {
			return nil, err
		}
	}
	if err := r.tarball(kernel, initramfs, mtime); err != nil {
		return nil, err
	}
	for _, f := range []string{r.Kernel(), r.Initramfs(), r.IPAKernel(), r.IPAInitramfs(), r.IPATarball()} {
		if err := r.write(f+".sha256", SumLine(r.Digests[f], path.Base(f))); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(r.Digests))
	for n := range r.Digests {
		names = append(names, n)
	}
	slices.Sort(names)
	var sums strings.Builder
	for _, n := range names {
		sums.WriteString(SumLine(r.Digests[n], n))
	}
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums.String()), 0o644); err != nil {
		return nil, fmt.Errorf("release directory: %w", err)
	}
	for _, n := range append(names, "SHA256SUMS") {
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(n)), mtime, mtime); err != nil {
			return nil, fmt.Errorf("release directory: %w", err)
		}
	}
	return r, nil
}

// SumLine is one line of sha256sum's output: the digest, two spaces (text
// mode) and the name.
func SumLine(digest, name string) string { return digest + "  " + name + "\n" }

// Path is the host path of the relative path rel.
func (r *Release) Path(rel string) string { return filepath.Join(r.Dir, filepath.FromSlash(rel)) }

// create opens rel for writing, its directories made.
func (r *Release) create(rel string) (*os.File, error) {
	p := r.Path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("release directory: %w", err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("release directory: %w", err)
	}
	return f, nil
}

// copy copies the host file from to rel, recording its digest.
func (r *Release) copy(from, rel string) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("release directory: %w", err)
	}
	defer in.Close()
	out, err := r.create(rel)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("release directory: copying %s to %s: %w", from, rel, err)
	}
	r.Digests[rel] = hex.EncodeToString(h.Sum(nil))
	return nil
}

// write writes b to rel, recording its digest.
func (r *Release) write(rel, b string) error {
	out, err := r.create(rel)
	if err != nil {
		return err
	}
	_, err = out.WriteString(b)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("release directory: %s: %w", rel, err)
	}
	sum := sha256.Sum256([]byte(b))
	r.Digests[rel] = hex.EncodeToString(sum[:])
	return nil
}

// tarball writes the IPA-layout tarball: ipa-<flavour>-master.kernel and
// .initramfs at its top level, what Metal3's downloader unpacks.
func (r *Release) tarball(kernel, initramfs string, mtime time.Time) error {
	out, err := r.create(r.IPATarball())
	if err != nil {
		return err
	}
	h := sha256.New()
	// Speed over size: the initramfs is compressed already, and the test
	// bed writes this on every run.
	gz, _ := gzip.NewWriterLevel(io.MultiWriter(out, h), gzip.BestSpeed)
	gz.ModTime = mtime
	tw := tar.NewWriter(gz)
	for _, m := range []struct{ from, name string }{{kernel, r.IPAName() + ".kernel"}, {initramfs, r.IPAName() + ".initramfs"}} {
		if err = addFile(tw, m.from, m.name, mtime); err != nil {
			break
		}
	}
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("release directory: %s: %w", r.IPATarball(), err)
	}
	r.Digests[r.IPATarball()] = hex.EncodeToString(h.Sum(nil))
	return nil
}

func addFile(tw *tar.Writer, from, name string, mtime time.Time) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: st.Size(), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}

// Read takes the release of version for arch that dir holds already (a
// real `make release` output, for the tests that read one), its digests
// computed from the files.
func Read(dir, version, arch string) (*Release, error) {
	r := &Release{Dir: dir, Version: version, Arch: arch, Digests: map[string]string{}}
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "SHA256SUMS" {
			return err
		}
		d, err := cachedir.FileSHA256(p)
		r.Digests[filepath.ToSlash(rel)] = d
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("release directory %s: %w", dir, err)
	}
	for _, f := range []string{r.Kernel(), r.Initramfs(), r.IPAKernel(), r.IPAInitramfs(), r.IPATarball(), "SHA256SUMS"} {
		if _, err := os.Stat(r.Path(f)); err != nil {
			return nil, fmt.Errorf("release directory %s is not a release of %s for %s: %w", dir, version, arch, err)
		}
	}
	return r, nil
}
