package downloader

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/logging"
)

// Options tune a run; the zero value is what the image runs with.
type Options struct {
	Log      *slog.Logger
	Attempts int           // tries per URL (default 4)
	Backoff  time.Duration // the first wait between tries, doubled each time (default 2 s)
}

// Result says what a run did.
type Result struct {
	// Dir is the cache directory the served names point into, below
	// ImagesDir: <Filename>-<etag>.
	Dir string
	// Installed is false when the files were already in place.
	Installed bool
	// Source is where the files came from: a URL, or the embedded path.
	Source string
}

// Run installs <DestName>.kernel, .initramfs and .headers below
// cfg.ImagesDir() as get-resource.sh does: each a symbolic link into the
// cache directory <Filename>-<etag> that holds the files. Nothing is
// linked before both files are complete and verified.
func Run(ctx context.Context, cfg Config, opts Options) (Result, error) {
	if opts.Attempts <= 0 {
		opts.Attempts = 4
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 2 * time.Second
	}
	r := &runner{cfg: cfg, log: logging.OrDiscard(opts.Log), images: cfg.ImagesDir(), tmpRoot: filepath.Join(cfg.SharedDir, "tmp")}
	for _, d := range []string{r.images, r.tmpRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return Result{}, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	if cfg.Embedded() {
		if cfg.CacheURL != "" {
			r.log.Info("CACHEURL is not used: no IPA_BASEURI is set, so the embedded ramdisk is installed", "cacheurl", cfg.CacheURL)
		}
		return r.embedded()
	}
	return r.download(ctx, newFetcher(cfg, r.log, opts.Attempts, opts.Backoff))
}

type runner struct {
	cfg     Config
	log     *slog.Logger
	images  string
	tmpRoot string
}

func (r *runner) kernelName() string    { return r.cfg.Stem + ".kernel" }
func (r *runner) initramfsName() string { return r.cfg.Stem + ".initramfs" }
func (r *runner) headersName() string   { return r.cfg.Filename + ".headers" }

// embedded installs the image's own files, after checking each against
// the .sha256 beside it.
func (r *runner) embedded() (Result, error) {
	files := filepath.Join(r.cfg.EmbeddedDir, "files")
	src := map[string]string{}
	digests := map[string]string{}
	for _, name := range []string{r.kernelName(), r.initramfsName()} {
		p := filepath.Join(files, name)
		if _, err := os.Stat(p); err != nil {
			return Result{}, fmt.Errorf("no embedded %s (%v): this image embeds %s; set IPA_FLAVOR and IPA_BRANCH to one of them (the branch is always master: one agent serves every Ironic series), or IPA_BASEURI to download", p, err, r.embeddedList(files))
		}
		sumData, err := os.ReadFile(p + ".sha256")
		if err != nil {
			return Result{}, fmt.Errorf("embedded %s has no checksum: %w", p, err)
		}
		want, err := ParseSHA256(sumData, name)
		if err != nil {
			return Result{}, fmt.Errorf("%s.sha256: %w", p, err)
		}
		got, err := cachedir.FileSHA256(p)
		if err != nil {
			return Result{}, err
		}
		if got != want {
			return Result{}, fmt.Errorf("embedded %s: SHA-256 %s, but %s.sha256 says %s: the image is damaged", p, got, p, want)
		}
		src[name], digests[name] = p, got
	}
	sum := sha256.Sum256([]byte(digests[r.kernelName()] + digests[r.initramfsName()]))
	tag := "embedded-" + hex.EncodeToString(sum[:])[:16]
	dirName := r.cfg.Filename + "-" + tag
	res := Result{Dir: dirName, Source: files}
	if r.cacheValid(dirName) {
		changed, err := r.link(dirName)
		res.Installed = changed
		return res, err
	}
	tmp, err := os.MkdirTemp(r.tmpRoot, "ipa-")
	if err != nil {
		return Result{}, fmt.Errorf("creating a temporary directory in %s: %w", r.tmpRoot, err)
	}
	defer os.RemoveAll(tmp)
	for name, p := range src {
		if err := copyVerified(p, filepath.Join(tmp, name), digests[name]); err != nil {
			return Result{}, err
		}
	}
	headers := dumpHeaders(reply{status: http.StatusOK, header: http.Header{"Etag": {`"` + tag + `"`}}})
	if err := r.finish(tmp, digests, headers); err != nil {
		return Result{}, err
	}
	if err := r.publish(tmp, dirName); err != nil {
		return Result{}, err
	}
	if _, err := r.link(dirName); err != nil {
		return Result{}, err
	}
	res.Installed = true
	return res, nil
}

func (r *runner) embeddedList(files string) string {
	matches, _ := filepath.Glob(filepath.Join(files, "*.kernel"))
	var stems []string
	for _, m := range matches {
		stems = append(stems, strings.TrimSuffix(filepath.Base(m), ".kernel"))
	}
	if len(stems) == 0 {
		return "nothing (" + files + " holds no kernel)"
	}
	sort.Strings(stems)
	return strings.Join(stems, ", ")
}

// download is get-resource.sh's path: the tarball from IPA_BASEURI (or
// CACHEURL), asked with If-None-Match when an ETag is known.
func (r *runner) download(ctx context.Context, f *fetcher) (Result, error) {
	cfg := r.cfg
	if cfg.CacheURL != "" {
		r.cacheHeaders(ctx, f)
	}
	etag := ""
	for _, name := range []string{cfg.DestName + ".headers", r.headersName()} {
		if data, err := os.ReadFile(filepath.Join(r.images, name)); err == nil {
			if etag = ETag(data); etag != "" {
				break
			}
		}
	}
	tmp, err := os.MkdirTemp(r.tmpRoot, "ipa-")
	if err != nil {
		return Result{}, fmt.Errorf("creating a temporary directory in %s: %w", r.tmpRoot, err)
	}
	defer os.RemoveAll(tmp)
	tarball := filepath.Join(tmp, cfg.Filename)
	out, err := os.OpenFile(tarball, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return Result{}, err
	}
	defer out.Close()

	src := cfg.BaseURI + "/" + cfg.Filename
	rep, sum, err := f.toFile(ctx, src, etag, out)
	if err != nil {
		return Result{}, err
	}
	if rep.status == http.StatusNotModified {
		dirName := cfg.Filename + "-" + CacheTag(etag)
		if r.cacheValid(dirName) {
			r.log.Info("not modified since the last download", "url", src, "etag", etag)
			changed, err := r.link(dirName)
			return Result{Dir: dirName, Installed: changed, Source: src}, err
		}
		// The server has nothing newer, but this volume lacks the files:
		// the cache has them under the ETag, else ask again in full.
		if cfg.CacheURL != "" {
			src = cfg.CacheURL + "/" + cfg.Stem + "-" + strings.ReplaceAll(etag, `"`, "") + "/" + cfg.Filename
			rep, sum, err = f.toFile(ctx, src, "", out)
			if err == nil && rep.status == http.StatusOK && rep.header.Get("Etag") == "" {
				rep.header.Set("Etag", etag)
			}
		} else {
			rep, sum, err = f.toFile(ctx, src, "", out)
		}
		if err != nil {
			return Result{}, err
		}
	}
	if rep.status != http.StatusOK {
		return Result{}, fmt.Errorf("GET %s: the server answered %d %s", src, rep.status, http.StatusText(rep.status))
	}
	if err := r.verifyTarball(ctx, f, sum); err != nil {
		return Result{}, err
	}
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		return Result{}, err
	}
	digests, err := r.extract(out, tmp, src)
	if err != nil {
		return Result{}, err
	}
	tag := CacheTag(rep.header.Get("Etag"))
	if tag == "" {
		// No ETag from the server: name the directory by content, so a
		// later run never mistakes it for another download.
		tag = "sha256-" + sum[:16]
	}
	dirName := cfg.Filename + "-" + tag
	if err := r.finish(tmp, digests, dumpHeaders(rep)); err != nil {
		return Result{}, err
	}
	if err := out.Close(); err != nil {
		return Result{}, err
	}
	if err := r.publish(tmp, dirName); err != nil {
		return Result{}, err
	}
	if _, err := r.link(dirName); err != nil {
		return Result{}, err
	}
	return Result{Dir: dirName, Installed: true, Source: src}, nil
}

// cacheHeaders fetches CACHEURL/<Filename>.headers once, as
// get-resource.sh does; a cache without it is no error.
func (r *runner) cacheHeaders(ctx context.Context, f *fetcher) {
	dst := filepath.Join(r.images, r.headersName())
	if _, err := os.Lstat(dst); err == nil {
		return
	}
	u := r.cfg.CacheURL + "/" + r.headersName()
	rep, data, err := f.small(ctx, u)
	if err != nil || rep.status != http.StatusOK {
		r.log.Info("no headers from the cache; downloading from IPA_BASEURI", "url", u, "status", rep.status, "err", err)
		return
	}
	if err := writeFileAtomic(dst, data); err != nil {
		r.log.Warn("keeping the cache's headers failed", "file", dst, "err", err)
	}
}

// verifyTarball checks the tarball against IPA_BASEURI's
// <Filename>.sha256 when the server has one. get-resource.sh checks
// nothing; IPA's and this project's releases publish the file.
func (r *runner) verifyTarball(ctx context.Context, f *fetcher, got string) error {
	u := r.cfg.BaseURI + "/" + r.cfg.Filename + ".sha256"
	rep, data, err := f.small(ctx, u)
	if err != nil {
		return err
	}
	if rep.status == http.StatusNotFound {
		r.log.Warn("no checksum published beside the tarball; it is installed unverified, as get-resource.sh installs it", "url", u)
		return nil
	}
	want, err := ParseSHA256(data, r.cfg.Filename)
	if err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	if got != want {
		return fmt.Errorf("%s: the downloaded tarball's SHA-256 is %s, but %s says %s: nothing was installed", r.cfg.Filename, got, u, want)
	}
	r.log.Info("tarball verified", "file", r.cfg.Filename, "sha256", got)
	return nil
}

// extract writes the tarball's kernel and initramfs into dir and returns
// their digests.
func (r *runner) extract(tarball *os.File, dir, src string) (map[string]string, error) {
	digests := map[string]string{}
	hashes := map[string]*hashingFile{}
	var members []Member
	for _, name := range []string{r.kernelName(), r.initramfsName()} {
		members = append(members, Member{Name: name, Open: func() (io.Writer, error) {
			f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return nil, err
			}
			h := &hashingFile{f: f, h: sha256.New()}
			hashes[name] = h
			return h, nil
		}})
	}
	err := Extract(tarball, members)
	for name, h := range hashes {
		if cerr := h.f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("writing %s: %w", h.f.Name(), cerr)
		}
		digests[name] = hex.EncodeToString(h.h.Sum(nil))
	}
	if err != nil {
		return nil, fmt.Errorf("%s (from %s): %w", r.cfg.Filename, src, err)
	}
	return digests, nil
}

// finish writes the headers and the digests of the files beside them, so
// a later run can tell the directory is whole.
func (r *runner) finish(dir string, digests map[string]string, headers string) error {
	for name, sum := range digests {
		if err := writeFileAtomic(filepath.Join(dir, name+".sha256"), []byte(sum+"  "+name+"\n")); err != nil {
			return err
		}
	}
	if err := writeFileAtomic(filepath.Join(dir, r.headersName()), []byte(headers)); err != nil {
		return err
	}
	for _, name := range []string{r.kernelName(), r.initramfsName()} {
		if err := syncFile(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return os.Chmod(dir, 0o755)
}

// publish renames the finished temporary directory to its place in the
// images directory, replacing a damaged one of the same name.
func (r *runner) publish(tmp, dirName string) error {
	dst := filepath.Join(r.images, dirName)
	if _, err := os.Lstat(dst); err == nil {
		old, err := os.MkdirTemp(r.tmpRoot, "old-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(old)
		if err := os.Rename(dst, filepath.Join(old, "d")); err != nil {
			return fmt.Errorf("moving the incomplete %s aside: %w", dst, err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("moving the new files to %s: %w", dst, err)
	}
	return syncDir(r.images)
}

// link points <DestName>.kernel, .initramfs and .headers at the files of
// dirName (relative links, as get-resource.sh's ln -sf makes), each
// replaced in one rename. It reports whether any link changed.
func (r *runner) link(dirName string) (bool, error) {
	changed := false
	for _, l := range []struct{ ext, target string }{
		{".kernel", r.kernelName()},
		{".initramfs", r.initramfsName()},
		{".headers", r.headersName()},
	} {
		dst := filepath.Join(r.images, r.cfg.DestName+l.ext)
		target := dirName + "/" + l.target
		if cur, err := os.Readlink(dst); err == nil && cur == target {
			continue
		}
		if fi, err := os.Lstat(dst); err == nil && fi.IsDir() {
			return changed, fmt.Errorf("%s is a directory; it should be the served file", dst)
		}
		tmp := filepath.Join(r.images, "."+r.cfg.DestName+l.ext+".new")
		os.Remove(tmp)
		if err := os.Symlink(target, tmp); err != nil {
			return changed, fmt.Errorf("linking %s: %w", dst, err)
		}
		if err := os.Rename(tmp, dst); err != nil {
			os.Remove(tmp)
			return changed, fmt.Errorf("linking %s: %w", dst, err)
		}
		changed = true
	}
	if changed {
		return true, syncDir(r.images)
	}
	return false, nil
}

// cacheValid reports whether dirName holds the kernel and initramfs whose
// digests it recorded.
func (r *runner) cacheValid(dirName string) bool {
	dir := filepath.Join(r.images, dirName)
	for _, name := range []string{r.kernelName(), r.initramfsName()} {
		p := filepath.Join(dir, name)
		data, err := os.ReadFile(p + ".sha256")
		if err != nil {
			return false
		}
		want, err := ParseSHA256(data, name)
		if err != nil {
			r.log.Warn("cached checksum unreadable; installing again", "file", p+".sha256", "err", err)
			return false
		}
		got, err := cachedir.FileSHA256(p)
		if err != nil || got != want {
			r.log.Warn("cached file damaged; installing again", "file", p, "sha256", got, "want", want, "err", err)
			return false
		}
	}
	return true
}

type hashingFile struct {
	f *os.File
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
}

func (w *hashingFile) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.h.Write(p[:n])
	return n, err
}

// copyVerified copies src to dst and checks that what was written has
// the digest want.
func copyVerified(src, dst, want string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("copying %s: read SHA-256 %s, verified %s a moment before: the file changed", src, got, want)
	}
	return nil
}

func writeFileAtomic(p string, data []byte) error {
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", p, err)
	}
	return nil
}

func syncFile(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", p, err)
	}
	return nil
}

func syncDir(p string) error {
	err := syncFile(p)
	if errors.Is(err, fs.ErrPermission) {
		return nil
	}
	return err
}
