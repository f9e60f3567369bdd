package downloaderimage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/ironic-go/ironic-agent/internal/testbed/ocirootfs"
)

func hexSum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func put(t *testing.T, p string, data []byte, sum string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if sum == "" {
		sum = hexSum(data)
	}
	os.WriteFile(p+".sha256", []byte(sum+"  "+filepath.Base(p)+"\n"), 0o644)
}

// fakeRelease writes the conventions' names for amd64 with small files.
func fakeRelease(t *testing.T, version string) string {
	dir := t.TempDir()
	for _, ext := range []string{"kernel", "initramfs"} {
		data := []byte(version + " " + ext)
		put(t, filepath.Join(dir, fmt.Sprintf("ironic-agent-%s-amd64.%s", version, ext)), data, "")
		put(t, filepath.Join(dir, "dib", "files", "ipa-goagent-master."+ext), data, "")
	}
	return dir
}

func build(t *testing.T, dir string) ([]byte, Options) {
	rel, err := ReadRelease(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "entry")
	os.WriteFile(bin, []byte("\x7fELF not really"), 0o755)
	o := Options{Release: rel, Entrypoint: bin, Arch: "amd64", Created: time.Unix(1700000000, 0), Revision: "abc123"}
	var b bytes.Buffer
	if _, err := Build(o, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), o
}

func TestImageDocuments(t *testing.T) {
	archive, o := build(t, fakeRelease(t, "0.2.0"))
	p := filepath.Join(t.TempDir(), "img.oci.tar")
	os.WriteFile(p, archive, 0o644)
	img, err := ocirootfs.Read(p)
	if err != nil {
		t.Fatal(err)
	}
	var lay struct {
		Version string `json:"imageLayoutVersion"`
	}
	if err := json.Unmarshal([]byte(img.Layout), &lay); err != nil || lay.Version != "1.0.0" {
		t.Errorf("oci-layout %q", img.Layout)
	}
	d := img.Index.Manifests[0]
	if d.Annotations["org.opencontainers.image.ref.name"] != "ironic-agent-downloader:0.2.0" || d.Platform == nil || d.Platform.Architecture != "amd64" {
		t.Errorf("index descriptor %+v", d)
	}
	if img.Manifest.MediaType != "application/vnd.oci.image.manifest.v1+json" || img.Manifest.Config.MediaType != "application/vnd.oci.image.config.v1+json" || len(img.Manifest.Layers) != 2 {
		t.Errorf("manifest %+v", img.Manifest)
	}
	c := img.Config
	if c.Architecture != "amd64" || c.OS != "linux" || c.Created != "2023-11-14T22:13:20Z" ||
		c.Config.User != "997:994" || strings.Join(c.Config.Entrypoint, " ") != "/usr/local/bin/get-resource.sh" ||
		strings.Join(c.Config.Env, " ") != "PATH=/usr/local/bin:/usr/bin:/bin" || c.Config.WorkingDir != "/" {
		t.Errorf("config %+v", c)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  "0.2.0",
		"org.opencontainers.image.source":   DefaultSource,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
	} {
		if got := c.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if bytes.Contains(archive, []byte(mustHostname(t))) {
		t.Error("the archive holds this host's name")
	}

	// The same image read by go-containerregistry and checked whole: digests,
	// sizes, diff IDs, the config's layer list.
	dir := t.TempDir()
	if err := extractTar(archive, dir); err != nil {
		t.Fatal(err)
	}
	ii, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.Image(mustHash(t, d.Digest))
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(im); err != nil {
		t.Errorf("validate: %v", err)
	}

	// The layers, unpacked: the entrypoint link, the user, the embedded files.
	root := t.TempDir()
	if os.Geteuid() == 0 {
		if err := img.Unpack(root); err != nil {
			t.Fatal(err)
		}
		if l, _ := os.Readlink(filepath.Join(root, "usr/local/bin/get-resource.sh")); l != "ironic-agent-downloader" {
			t.Errorf("get-resource.sh -> %q", l)
		}
		if b, _ := os.ReadFile(filepath.Join(root, "etc/passwd")); !strings.Contains(string(b), "ironic:x:997:994:") {
			t.Errorf("/etc/passwd %q", b)
		}
		for _, ext := range []string{"kernel", "initramfs"} {
			p := filepath.Join(root, "usr/share/ironic-agent/dib/files/ipa-goagent-master."+ext)
			b, _ := os.ReadFile(p)
			s, _ := os.ReadFile(p + ".sha256")
			if string(b) != "0.2.0 "+ext || string(s) != hexSum(b)+"  ipa-goagent-master."+ext+"\n" {
				t.Errorf("%s: %q, %q", p, b, s)
			}
		}
	}
}

func TestImageReproducible(t *testing.T) {
	dir := fakeRelease(t, "0.2.0")
	a, _ := build(t, dir)
	b, _ := build(t, dir)
	if hexSum(a) != hexSum(b) {
		t.Errorf("two builds differ: %s, %s", hexSum(a), hexSum(b))
	}
}

func TestReadReleaseRefuses(t *testing.T) {
	dir := fakeRelease(t, "0.2.0")
	if _, err := ReadRelease(dir, "0.3.0"); err == nil || !strings.Contains(err.Error(), "ironic-agent-0.3.0-<arch>.kernel") {
		t.Errorf("other version: %v", err)
	}
	put(t, filepath.Join(dir, "ironic-agent-0.1.0-amd64.kernel"), []byte("x"), "")
	if _, err := ReadRelease(dir, ""); err == nil || !strings.Contains(err.Error(), "-version") {
		t.Errorf("two versions: %v", err)
	}
	if rel, err := ReadRelease(dir, "0.2.0"); err != nil || len(rel.Files) != 2 {
		t.Errorf("-version 0.2.0: %+v, %v", rel, err)
	}
	os.Remove(filepath.Join(dir, "ironic-agent-0.1.0-amd64.kernel"))
	put(t, filepath.Join(dir, "dib", "files", "ipa-goagent-master.kernel"), []byte("other"), "")
	if _, err := ReadRelease(dir, ""); err == nil || !strings.Contains(err.Error(), "is not the same file as") {
		t.Errorf("differing copy: %v", err)
	}
	put(t, filepath.Join(dir, "dib", "files", "ipa-goagent-master.kernel"), []byte("0.2.0 kernel"), strings.Repeat("1", 64))
	if _, err := ReadRelease(dir, ""); err == nil || !strings.Contains(err.Error(), ".sha256 says") {
		t.Errorf("bad checksum: %v", err)
	}
}
