package downloader_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/ocirootfs"
)

// The image read by an OCI implementation that is not the project's:
// umoci (Debian's package, installed by test.sh) lists the reference,
// unpacks the layers into a runtime bundle and writes the runtime config
// from the image config; the entrypoint then runs from that bundle's root
// and serves what the release holds. A mistake shared by the image writer
// and the test bed's reader (internal/testbed/ocirootfs) would pass the
// other tests and fail here.
func TestDownloaderImageUmoci(t *testing.T) {
	needRoot(t)
	umoci, err := exec.LookPath("umoci")
	if err != nil {
		t.Skip("umoci is not installed (./test.sh installs Debian's umoci)")
	}
	rel := makeRelease(t)
	img := buildImage(t, rel)

	archive, err := ocirootfs.Read(img.archive)
	if err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(t.TempDir(), "layout")
	if err := archive.WriteLayout(layout); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, umoci, "ls", "--layout", layout).CombinedOutput()
	if err != nil {
		t.Fatalf("umoci ls: %v\n%s", err, out)
	}
	ref := "ironic-agent-downloader:" + version
	if tags := strings.Fields(string(out)); !slices.Equal(tags, []string{ref}) {
		t.Fatalf("umoci ls: %q, want the one reference %q", tags, ref)
	}
	bundle := filepath.Join(t.TempDir(), "bundle")
	if out, err := exec.CommandContext(ctx, umoci, "unpack", "--image", layout+":"+ref, bundle).CombinedOutput(); err != nil {
		t.Fatalf("umoci unpack: %v\n%s", err, out)
	}

	// The runtime config umoci derived must say what the image config says.
	var spec struct {
		Process struct {
			User struct{ UID, GID int }
			Args []string
			Env  []string
			Cwd  string
		}
	}
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatalf("umoci's config.json: %v", err)
	}
	uid, gid, err := parseUser(img.cfg.Config.User)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Process.User.UID != uid || spec.Process.User.GID != gid {
		t.Errorf("umoci runs as %d:%d, the image config says %q", spec.Process.User.UID, spec.Process.User.GID, img.cfg.Config.User)
	}
	if want := append(append([]string{}, img.cfg.Config.Entrypoint...), img.cfg.Config.Cmd...); !slices.Equal(spec.Process.Args, want) {
		t.Errorf("umoci's process: %q, want %q", spec.Process.Args, want)
	}
	for _, e := range img.cfg.Config.Env {
		if !slices.Contains(spec.Process.Env, e) {
			t.Errorf("umoci's environment lacks %q: %q", e, spec.Process.Env)
		}
	}
	rootfs := filepath.Join(bundle, "rootfs")
	st, err := os.Stat(filepath.Join(rootfs, strings.TrimPrefix(spec.Process.Args[0], "/")))
	if err != nil || st.Mode().Perm()&0o001 == 0 {
		t.Fatalf("entrypoint in umoci's rootfs: %v, %v", st, err)
	}
	if err := os.Chmod(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}

	shared := sharedVolume(t, img)
	if out, code := runImage(t, rootfs, img.cfg, shared); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	checkServed(t, shared, rel, img, "ironic-python-agent", "amd64")
}
