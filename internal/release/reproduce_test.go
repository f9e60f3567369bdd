package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
)

// TestReproducible builds the release of both architectures twice, into
// two directories, from the same tree and package cache, and compares
// every file's digest, the amd64 ESP image's too: the promise of
// docs/releases.md. It builds four ramdisks and four ISOs (a few
// minutes), so it runs with RELEASE_REPRODUCE=1 (docs/testing.md).
func TestReproducible(t *testing.T) {
	if os.Getenv("RELEASE_REPRODUCE") != "1" {
		t.Skip("SKIPPED: builds the release twice; set RELEASE_REPRODUCE=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cache, err := cachedir.Dir()
	if err != nil {
		t.Fatal(err)
	}
	fl, err := ramdisk.LookupKernelFlavour(ramdisk.DefaultKernelFlavour)
	if err != nil {
		t.Fatal(err)
	}
	src, err := ReadSource(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	var sums [2][]byte
	var dirs [2]string
	for i := range sums {
		dirs[i] = t.TempDir()
		start := time.Now()
		for _, arch := range ramdisk.Arches() {
			fa := fl
			fa.Arch = arch.Name
			opts := Options{SrcDir: root, OutDir: dirs[i], CacheDir: cache, Flavour: fa, Arch: arch.Name}
			if err := Build(ctx, opts, src); err != nil {
				t.Fatalf("%s: %v", arch.Name, err)
			}
		}
		if err := WriteSums(dirs[i]); err != nil {
			t.Fatal(err)
		}
		t.Logf("build %d: %.1fs", i+1, time.Since(start).Seconds())
		if sums[i], err = os.ReadFile(filepath.Join(dirs[i], SumsName)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("SHA256SUMS:\n%s", sums[0])
	if !bytes.Equal(sums[0], sums[1]) {
		t.Fatalf("two builds differ:\n%s\n---\n%s", sums[0], sums[1])
	}
	if esp := ESPName(src.Version, "amd64"); !bytes.Contains(sums[0], []byte("  "+esp+"\n")) || !bytes.Contains(sums[0], []byte("  "+esp+".sha256\n")) {
		t.Errorf("SHA256SUMS lists no %s with its .sha256", esp)
	}
	for _, arch := range ramdisk.Arches() {
		_, initramfs, _, _ := Names(src.Version, arch.Name)
		b, err := os.ReadFile(filepath.Join(dirs[0], initramfs))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(data, []byte(ramdisk.ReleasePath+"\x00")) || !bytes.Contains(data, []byte(`IRONIC_AGENT_VERSION="`+src.Version+`"`)) {
			t.Errorf("the %s initramfs has no %s saying version %s", arch.Name, ramdisk.ReleasePath, src.Version)
		}
	}
	for _, want := range []string{"ironic-agent-" + src.Version + "-arm64.kernel", "dib/ipa-goagent-arm64-master.tar.gz", "dib/files/ipa-goagent-master.initramfs"} {
		if !bytes.Contains(sums[0], []byte("  "+want+"\n")) {
			t.Errorf("SHA256SUMS lists no %s", want)
		}
	}
}
