// Package downloader_test builds the Metal3 downloader image from a fake
// release, unpacks it as a container runtime does and runs its entrypoint
// in a mount namespace of its own, chrooted, as the image's user without
// capabilities, with a temporary shared volume; then checks what it wrote
// against the release's digests at the paths Metal3's ironic-image serves.
// Needs root; boots nothing.
package downloader_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/downloaderimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/ocirootfs"
)

const version = "0.2.0"

// What ironic-image serves from the shared volume: httpd's DocumentRoot is
// /shared/html; the inspector's iPXE script (ironic-config/inspector.ipxe.j2)
// boots ${IRONIC_IPA_BASE_URL}/images/ironic-python-agent.kernel and
// .initramfs; ironic.conf's deploy_kernel is
// file:///shared/html/images/ironic-python-agent.kernel (scripts/ironic-common.sh,
// which also finds ironic-python-agent_<arch>.kernel for deploy_kernel_by_arch).
const (
	docRoot        = "html"
	ipxeKernel     = "/images/ironic-python-agent.kernel"
	ipxeInitramfs  = "/images/ironic-python-agent.initramfs"
	allowedFileDir = "html/images" // [conductor]file_url_allowed_paths
)

// release is a fake release directory with the conventions' names.
type release struct {
	dir     string
	digests map[string]string // ironic-agent-0.2.0-<arch>.<kernel|initramfs> -> sha256
}

func makeRelease(t *testing.T) release {
	t.Helper()
	dir := t.TempDir()
	rel := release{dir: dir, digests: map[string]string{}}
	rng := rand.New(rand.NewSource(1))
	for _, a := range []struct{ arch, flavour string }{{"amd64", "goagent"}, {"arm64", "goagent-arm64"}} {
		stem := "ipa-" + a.flavour + "-master"
		var tb bytes.Buffer
		gz := gzip.NewWriter(&tb)
		tw := tar.NewWriter(gz)
		for _, ext := range []string{"kernel", "initramfs"} {
			data := make([]byte, 4096+rng.Intn(8192))
			rng.Read(data)
			name := fmt.Sprintf("ironic-agent-%s-%s.%s", version, a.arch, ext)
			writeWithSum(t, filepath.Join(dir, name), data)
			writeWithSum(t, filepath.Join(dir, "dib", "files", stem+"."+ext), data)
			rel.digests[name] = sum(data)
			if err := tw.WriteHeader(&tar.Header{Name: stem + "." + ext, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			tw.Write(data)
		}
		tw.Close()
		gz.Close()
		writeWithSum(t, filepath.Join(dir, "dib", stem+".tar.gz"), tb.Bytes())
	}
	return rel
}

func writeWithSum(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+".sha256", []byte(sum(data)+"  "+filepath.Base(p)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// image builds the entrypoint and the image from rel, and unpacks it.
type image struct {
	rootfs  string
	cfg     ocirootfs.Config
	archive string // the OCI image layout archive, as the release carries it
}

func buildImage(t *testing.T, rel release) image {
	t.Helper()
	work := t.TempDir()
	bin := filepath.Join(work, "ironic-agent-downloader")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "../../cmd/ironic-agent-downloader")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r, err := downloaderimage.ReadRelease(rel.dir, "")
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(work, "ironic-agent-"+version+"-downloader.oci.tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := downloaderimage.Build(downloaderimage.Options{Release: r, Entrypoint: bin, Arch: "amd64", Created: time.Unix(1700000000, 0)}, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	img, err := ocirootfs.Read(archive)
	if err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(work, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := img.Unpack(rootfs); err != nil {
		t.Fatal(err)
	}
	// The runtime's root directory: traversable by the image's user.
	if err := os.Chmod(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	return image{rootfs: rootfs, cfg: img.Config, archive: archive}
}

// sharedVolume is an empty volume owned by the image's user, as the
// emptyDir Metal3 mounts at /shared.
func sharedVolume(t *testing.T, img image) string {
	t.Helper()
	uid, gid, err := parseUser(img.cfg.Config.User)
	if err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, uid, gid); err != nil {
		t.Fatal(err)
	}
	return d
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: a mount namespace, chroot and a change of user, as a container runtime does")
	}
}

// checkServed checks that ironic-image finds name.kernel and
// name.initramfs where it looks, with the release's bytes for arch, written
// by the image's user, readable by httpd, resolving inside the directory
// file_url_allowed_paths allows; and, for the default name, that the iPXE
// discovery script's URLs serve them from httpd's document root.
func checkServed(t *testing.T, shared string, rel release, img image, name, arch string) {
	t.Helper()
	uid, _, _ := parseUser(img.cfg.Config.User)
	allowed, _ := filepath.EvalSymlinks(filepath.Join(shared, allowedFileDir))
	for _, ext := range []string{"kernel", "initramfs"} {
		p := filepath.Join(shared, "html", "images", name+"."+ext)
		resolved, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if !strings.HasPrefix(resolved, allowed+"/") {
			t.Errorf("%s resolves to %s, outside %s", p, resolved, allowed)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		want := rel.digests[fmt.Sprintf("ironic-agent-%s-%s.%s", version, arch, ext)]
		if got := sum(data); got != want {
			t.Errorf("%s: sha256 %s, release says %s", p, got, want)
		}
		fi, _ := os.Stat(p)
		if fi.Mode().Perm()&0o004 == 0 {
			t.Errorf("%s: mode %v, not readable by httpd", p, fi.Mode())
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
			t.Errorf("%s: owned by uid %d, not the image's user %d", p, st.Uid, uid)
		}
		if _, err := os.Stat(filepath.Join(shared, "html", "images", name+".headers")); err != nil {
			t.Errorf("no %s.headers: %v", name, err)
		}
	}
	if name != "ironic-python-agent" {
		return
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(shared, docRoot))))
	defer srv.Close()
	for _, u := range []struct{ path, ext string }{{ipxeKernel, "kernel"}, {ipxeInitramfs, "initramfs"}} {
		resp, err := http.Get(srv.URL + u.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := rel.digests[fmt.Sprintf("ironic-agent-%s-%s.%s", version, arch, u.ext)]
		if resp.StatusCode != http.StatusOK || sum(body) != want {
			t.Errorf("iPXE discovery URL %s: %s, sha256 %s, want %s", u.path, resp.Status, sum(body), want)
		}
	}
}

func TestDownloaderImageEmbedded(t *testing.T) {
	needRoot(t)
	rel := makeRelease(t)
	img := buildImage(t, rel)

	t.Run("air-gapped default", func(t *testing.T) {
		shared := sharedVolume(t, img)
		if out, code := runImage(t, img.rootfs, img.cfg, shared); code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		checkServed(t, shared, rel, img, "ironic-python-agent", "amd64")
		tmp, _ := os.ReadDir(filepath.Join(shared, "tmp"))
		if len(tmp) != 0 {
			t.Errorf("left in %s/tmp: %v", shared, tmp)
		}
		// A second run (a restarted pod) finds everything in place.
		before := linkTimes(t, shared, "ironic-python-agent")
		out, code := runImage(t, img.rootfs, img.cfg, shared)
		if code != 0 || !strings.Contains(out, "already in place") {
			t.Fatalf("second run: exit %d, want 0 and \"already in place\"\n%s", code, out)
		}
		if after := linkTimes(t, shared, "ironic-python-agent"); after != before {
			t.Errorf("second run rewrote the links: %s, then %s", before, after)
		}
	})

	t.Run("IPA_ARCH suffix", func(t *testing.T) {
		shared := sharedVolume(t, img)
		if out, code := runImage(t, img.rootfs, img.cfg, shared); code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		if out, code := runImage(t, img.rootfs, img.cfg, shared, "IPA_ARCH=aarch64"); code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		checkServed(t, shared, rel, img, "ironic-python-agent_aarch64", "arm64")
		checkServed(t, shared, rel, img, "ironic-python-agent", "amd64")
		// An architecture the image has no ramdisk for fails, naming what it has.
		out, code := runImage(t, img.rootfs, img.cfg, shared, "IPA_ARCH=x86_64", "IPA_BRANCH=stable/2025.1")
		if code != 1 || !strings.Contains(out, "ipa-goagent-stable-2025.1.kernel") || !strings.Contains(out, "ipa-goagent-master") {
			t.Errorf("IPA_BRANCH=stable/2025.1: exit %d, want 1 naming the missing file and the embedded ones\n%s", code, out)
		}
	})

	t.Run("files already present", func(t *testing.T) {
		shared := sharedVolume(t, img)
		uid, gid, _ := parseUser(img.cfg.Config.User)
		images := filepath.Join(shared, "html", "images")
		for _, d := range []string{filepath.Join(shared, "html"), images} {
			os.Mkdir(d, 0o755)
			os.Chown(d, uid, gid)
		}
		for _, ext := range []string{"kernel", "initramfs", "headers"} {
			p := filepath.Join(images, "ironic-python-agent."+ext)
			os.WriteFile(p, []byte("an older "+ext+"\n"), 0o644)
			os.Chown(p, uid, gid)
		}
		if out, code := runImage(t, img.rootfs, img.cfg, shared); code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		checkServed(t, shared, rel, img, "ironic-python-agent", "amd64")
	})
}

func linkTimes(t *testing.T, shared, name string) string {
	var b strings.Builder
	for _, ext := range []string{"kernel", "initramfs", "headers"} {
		fi, err := os.Lstat(filepath.Join(shared, "html", "images", name+"."+ext))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%d:%d ", ext, fi.Sys().(*syscall.Stat_t).Ino, fi.ModTime().UnixNano())
	}
	return b.String()
}

// dibServer serves the release's dib/ directory as IPA's tarball server
// does, with an ETag per file and If-None-Match answered 304; it counts
// the full answers per path.
type dibServer struct {
	*httptest.Server
	mu   sync.Mutex
	full map[string]int
	sums map[string]string // a path -> the .sha256 body to serve instead of the file's
}

func newDIBServer(t *testing.T, dir string) *dibServer {
	s := &dibServer{full: map[string]int{}, sums: map[string]string{}}
	files := http.FileServer(http.Dir(dir))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		override, ok := s.sums[r.URL.Path]
		s.mu.Unlock()
		if ok {
			io.WriteString(w, override)
			return
		}
		if data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(r.URL.Path))); err == nil {
			w.Header().Set("ETag", `"`+sum(data)[:12]+`"`)
		}
		rec := &statusRecorder{ResponseWriter: w}
		files.ServeHTTP(rec, r)
		if rec.status == http.StatusOK {
			s.mu.Lock()
			s.full[r.URL.Path]++
			s.mu.Unlock()
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *dibServer) count(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full[p]
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func TestDownloaderImageIPABaseURI(t *testing.T) {
	needRoot(t)
	rel := makeRelease(t)
	img := buildImage(t, rel)
	srv := newDIBServer(t, filepath.Join(rel.dir, "dib"))
	tarball := "/ipa-goagent-master.tar.gz"

	t.Run("download, then the cache", func(t *testing.T) {
		shared := sharedVolume(t, img)
		out, code := runImage(t, img.rootfs, img.cfg, shared, "IPA_BASEURI="+srv.URL, "IPA_BRANCH=master", "IPA_FLAVOR=goagent")
		if code != 0 || !strings.Contains(out, "tarball verified") {
			t.Fatalf("exit %d, want 0 and the tarball verified\n%s", code, out)
		}
		checkServed(t, shared, rel, img, "ironic-python-agent", "amd64")
		target, _ := os.Readlink(filepath.Join(shared, "html", "images", "ironic-python-agent.kernel"))
		etag := sum(mustRead(t, filepath.Join(rel.dir, "dib", tarball)))[:12]
		if want := "ipa-goagent-master.tar.gz-" + etag + "/ipa-goagent-master.kernel"; target != want {
			t.Errorf("ironic-python-agent.kernel -> %s, want get-resource.sh's %s", target, want)
		}
		if n := srv.count(tarball); n != 1 {
			t.Fatalf("tarball fetched %d times, want 1", n)
		}
		out, code = runImage(t, img.rootfs, img.cfg, shared, "IPA_BASEURI="+srv.URL)
		if code != 0 || !strings.Contains(out, "not modified") {
			t.Fatalf("second run: exit %d, want 0 and \"not modified\"\n%s", code, out)
		}
		if n := srv.count(tarball); n != 1 {
			t.Errorf("second run fetched the tarball again (%d full answers): the ETag cache was not used", n)
		}
		checkServed(t, shared, rel, img, "ironic-python-agent", "amd64")
	})

	t.Run("aarch64 from the server", func(t *testing.T) {
		shared := sharedVolume(t, img)
		out, code := runImage(t, img.rootfs, img.cfg, shared, "IPA_BASEURI="+srv.URL, "IPA_ARCH=aarch64")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		checkServed(t, shared, rel, img, "ironic-python-agent_aarch64", "arm64")
	})

	t.Run("bad checksum", func(t *testing.T) {
		shared := sharedVolume(t, img)
		bad := strings.Repeat("0", 64) + "  ipa-goagent-master.tar.gz\n"
		srv.mu.Lock()
		srv.sums[tarball+".sha256"] = bad
		srv.mu.Unlock()
		defer func() { srv.mu.Lock(); delete(srv.sums, tarball+".sha256"); srv.mu.Unlock() }()
		out, code := runImage(t, img.rootfs, img.cfg, shared, "IPA_BASEURI="+srv.URL)
		if code != 1 {
			t.Fatalf("exit %d, want 1\n%s", code, out)
		}
		for _, want := range []string{"ipa-goagent-master.tar.gz", "SHA-256", srv.URL + tarball + ".sha256", strings.Repeat("0", 64)} {
			if !strings.Contains(out, want) {
				t.Errorf("the error does not name %q:\n%s", want, out)
			}
		}
		for _, ext := range []string{"kernel", "initramfs", "headers"} {
			if _, err := os.Lstat(filepath.Join(shared, "html", "images", "ironic-python-agent."+ext)); err == nil {
				t.Errorf("ironic-python-agent.%s exists after a failed verification", ext)
			}
		}
		entries, _ := os.ReadDir(filepath.Join(shared, "html", "images"))
		tmp, _ := os.ReadDir(filepath.Join(shared, "tmp"))
		if len(entries) != 0 || len(tmp) != 0 {
			t.Errorf("left behind: images %v, tmp %v", entries, tmp)
		}
	})
}

func mustRead(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
