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
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/release"
)

// Release is a laid out release directory.
type Release struct {
	Dir     string
	Version string
	Arch    string
	// Digests holds the SHA-256 of every file of the tree but
	// SHA256SUMS, by relative path (slash-separated).
	Digests map[string]string
}

// Kernel and Initramfs are the versioned files' relative paths, as
// `make release` names them (release.Names).
func (r *Release) Kernel() string {
	k, _, _, _ := release.Names(r.Version, r.Arch)
	return k
}

func (r *Release) Initramfs() string {
	_, i, _, _ := release.Names(r.Version, r.Arch)
	return i
}

// IPAName is the IPA-layout base name, ipa-<flavour>-master.
func (r *Release) IPAName() string { return "ipa-" + release.Flavour(r.Arch) + "-" + release.Branch }

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
	r := &Release{Dir: dir, Version: version, Arch: arch}
	if _, err := os.Stat(filepath.Join(dir, release.SumsName)); err == nil {
		return nil, fmt.Errorf("release directory %s already holds a release (%s exists)", dir, release.SumsName)
	}
	for _, c := range []struct{ from, to string }{
		{kernel, r.Kernel()}, {initramfs, r.Initramfs()},
		{kernel, r.IPAKernel()}, {initramfs, r.IPAInitramfs()},
	} {
		if err := r.copy(c.from, c.to); err != nil {
			return nil, err
		}
	}
	// The tarball, the .sha256 files and SHA256SUMS come from the
	// release build's own writers.
	if err := release.WriteTarGz(r.Path(r.IPATarball()), []release.TarFile{
		{Name: r.IPAName() + ".kernel", Path: kernel}, {Name: r.IPAName() + ".initramfs", Path: initramfs},
	}, mtime); err != nil {
		return nil, err
	}
	for _, f := range []string{r.Kernel(), r.Initramfs(), r.IPAKernel(), r.IPAInitramfs(), r.IPATarball()} {
		if err := release.WriteSidecar(r.Path(f)); err != nil {
			return nil, err
		}
	}
	if err := release.WriteSums(dir); err != nil {
		return nil, err
	}
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		return os.Chtimes(p, mtime, mtime)
	})
	if err != nil {
		return nil, fmt.Errorf("release directory: %w", err)
	}
	return Read(dir, version, arch)
}

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

// copy copies the host file from to rel.
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
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("release directory: copying %s to %s: %w", from, rel, err)
	}
	return nil
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
		if err != nil || rel == release.SumsName {
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
