// Package downloaderimage builds the Metal3 downloader image: an OCI
// image layout archive whose entrypoint is the static
// ironic-agent-downloader (also as /usr/local/bin/get-resource.sh, the
// command Metal3's manifests run) and which embeds a release's kernels
// and initramfs images, so it installs them with no network. No container
// daemon is involved: the layers are tar files written here, the image
// documents come from go-containerregistry.
package downloaderimage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/downloader"
)

// Arches are the architectures a release may hold, with the flavour of
// their IPA-layout copies and IPA_ARCH's name for them.
var arches = []struct{ arch, flavour, ipaArch string }{
	{"amd64", "goagent", "x86_64"},
	{"arm64", "goagent-arm64", "aarch64"},
}

// Branch is the one branch a release's IPA-layout copies are written for.
const Branch = "master"

// Release is what a release directory holds for the image.
type Release struct {
	Dir     string
	Version string
	Files   []File // the IPA-layout kernel and initramfs of every architecture, sorted by name
}

// File is one embedded file: its name below dib/files and its digest,
// checked against both .sha256 files the release has for its bytes.
type File struct {
	Arch   string // amd64, arm64
	Name   string // ipa-goagent-master.kernel
	Path   string // in the release directory
	SHA256 string
	Size   int64
}

var versioned = regexp.MustCompile(`^ironic-agent-(.+)-(amd64|arm64)\.kernel$`)

// ReadRelease reads a release directory laid out by `make release`:
// ironic-agent-<version>-<arch>.kernel and .initramfs, each with its
// .sha256, and their copies dib/files/ipa-<flavour>-master.kernel and
// .initramfs with theirs. version "" takes it from the file names, which
// must then agree on one.
func ReadRelease(dir, version string) (Release, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Release{}, fmt.Errorf("release directory: %w", err)
	}
	versions := map[string][]string{}
	for _, e := range entries {
		if m := versioned.FindStringSubmatch(e.Name()); m != nil {
			versions[m[1]] = append(versions[m[1]], m[2])
		}
	}
	if version == "" {
		var found []string
		for v := range versions {
			found = append(found, v)
		}
		sort.Strings(found)
		switch len(found) {
		case 0:
			return Release{}, fmt.Errorf("release directory %s: no ironic-agent-<version>-<arch>.kernel in it", dir)
		case 1:
			version = found[0]
		default:
			return Release{}, fmt.Errorf("release directory %s: kernels of versions %s; say which with -version", dir, strings.Join(found, ", "))
		}
	}
	archs := versions[version]
	if len(archs) == 0 {
		return Release{}, fmt.Errorf("release directory %s: no ironic-agent-%s-<arch>.kernel in it", dir, version)
	}
	rel := Release{Dir: dir, Version: version}
	for _, a := range arches {
		if !contains(archs, a.arch) {
			continue
		}
		for _, ext := range []string{"kernel", "initramfs"} {
			top := filepath.Join(dir, fmt.Sprintf("ironic-agent-%s-%s.%s", version, a.arch, ext))
			name := fmt.Sprintf("ipa-%s-%s.%s", a.flavour, Branch, ext)
			copyPath := filepath.Join(dir, "dib", "files", name)
			topSum, _, err := verified(top)
			if err != nil {
				return Release{}, err
			}
			sum, size, err := verified(copyPath)
			if err != nil {
				return Release{}, err
			}
			if sum != topSum {
				return Release{}, fmt.Errorf("%s (SHA-256 %s) is not the same file as %s (SHA-256 %s)", copyPath, sum, top, topSum)
			}
			rel.Files = append(rel.Files, File{Arch: a.arch, Name: name, Path: copyPath, SHA256: sum, Size: size})
		}
	}
	sort.Slice(rel.Files, func(i, j int) bool { return rel.Files[i].Name < rel.Files[j].Name })
	return rel, nil
}

// verified hashes p and compares it with p.sha256.
func verified(p string) (string, int64, error) {
	data, err := os.ReadFile(p + ".sha256")
	if err != nil {
		return "", 0, fmt.Errorf("release file %s has no checksum: %w", p, err)
	}
	want, err := downloader.ParseSHA256(data, filepath.Base(p))
	if err != nil {
		return "", 0, fmt.Errorf("%s.sha256: %w", p, err)
	}
	f, err := os.Open(p)
	if err != nil {
		return "", 0, fmt.Errorf("release file: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("reading %s: %w", p, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != want {
		return "", 0, fmt.Errorf("%s: SHA-256 %s, but %s.sha256 says %s", p, got, p, want)
	}
	return got, n, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
