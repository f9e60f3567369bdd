package ramdisk

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/debian"
)

// debianSuiteNames are the Debian release names and aliases a host
// source may name; a source of another distribution (Ubuntu's,
// a third party's) is not a Debian mirror.
var debianSuiteNames = []string{"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
	"oldoldstable", "oldstable", "stable", "testing", "unstable"}

// ResolveMirrors fills the mirrors m leaves empty: with the host's
// Debian sources when it has them (HostDebianSources of /etc/apt: the
// first mirror of a Debian suite, and the first of a -security suite),
// else with Debian's own (debian.DefaultArchive, debian.DefaultSecurity).
// Expired suites are taken (IgnoreValidUntil) when m says so or the
// host's apt does (Acquire::Check-Valid-Until "false": a host on a
// frozen mirror). The host's apt configuration is only read.
func ResolveMirrors(m debian.Mirrors) (debian.Mirrors, error) {
	if !m.IgnoreValidUntil {
		m.IgnoreValidUntil = hostIgnoresValidUntil("/etc/apt")
	}
	if m.Archive == "" || m.Security == "" {
		archive, security := hostMirrors("/etc/apt")
		if m.Archive == "" {
			m.Archive = cmpOr(archive, debian.DefaultArchive)
		}
		if m.Security == "" {
			m.Security = cmpOr(security, debian.DefaultSecurity)
		}
	}
	m.Archive, m.Security = strings.TrimSuffix(m.Archive, "/"), strings.TrimSuffix(m.Security, "/")
	if err := m.Check(); err != nil {
		return m, fmt.Errorf("ramdisk: %w", err)
	}
	return m, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// checkValidUntilOff matches apt's option turning the Valid-Until check
// off, in its one-line form.
var checkValidUntilOff = regexp.MustCompile(`(?mi)^\s*Acquire::Check-Valid-Until\s+"?(false|no|0|off)"?\s*;`)

// hostIgnoresValidUntil says whether the host's apt configuration (etc:
// apt.conf and apt.conf.d/*) turns the Valid-Until check off.
func hostIgnoresValidUntil(etc string) bool {
	files, _ := filepath.Glob(filepath.Join(etc, "apt.conf.d", "*"))
	for _, p := range append([]string{filepath.Join(etc, "apt.conf")}, files...) {
		if b, err := os.ReadFile(p); err == nil && checkValidUntilOff.Match(b) {
			return true
		}
	}
	return false
}

// hostMirrors returns the URIs of the host's first Debian archive and
// security archive sources ("" for a kind it has none of).
func hostMirrors(etc string) (archive, security string) {
	srcs, err := HostDebianSources(etc)
	if err != nil {
		return "", ""
	}
	for _, s := range srcs {
		f := strings.Fields(s)
		if len(f) < 3 {
			continue
		}
		uri, suite := f[len(f)-2], f[len(f)-1]
		base, _, _ := strings.Cut(suite, "-")
		if !slices.Contains(debianSuiteNames, base) {
			continue
		}
		if strings.HasSuffix(suite, "-security") {
			if security == "" {
				security = uri
			}
		} else if archive == "" {
			archive = uri
		}
	}
	return archive, security
}

// archiveClient returns the Debian archive client of architecture arch
// ("": DefaultArch) on mirrors m (empty fields resolved by
// ResolveMirrors), caching below cacheDir/debian.
func archiveClient(cacheDir, arch string, m debian.Mirrors) (*debian.Client, error) {
	a, err := LookupArch(arch)
	if err != nil {
		return nil, err
	}
	m, err = ResolveMirrors(m)
	if err != nil {
		return nil, err
	}
	return &debian.Client{Mirrors: m, Arch: a.Name, Cache: filepath.Join(cacheDir, "debian")}, nil
}

// flavourIndex returns the archive client of flavour f and the package
// index of its suites (components main and non-free-firmware).
func flavourIndex(ctx context.Context, cacheDir string, f KernelFlavour) (*debian.Client, *debian.Index, error) {
	c, err := archiveClient(cacheDir, f.Arch, f.Mirrors)
	if err != nil {
		return nil, nil, err
	}
	ix, err := c.Packages(ctx, f.Suites, strings.Fields(firmwareDebianComponents))
	if err != nil {
		return nil, nil, fmt.Errorf("ramdisk: kernel flavour %s: %w", f.Name, err)
	}
	return c, ix, nil
}

// fetchPackages downloads the packages names of ix (their highest
// versions) and extracts each into base/pkg/<sha256 of the .deb>, so a
// new package version is a new directory and never mixed with an older
// one.
func fetchPackages(ctx context.Context, c *debian.Client, ix *debian.Index, base string, names []string) ([]FirmwarePackage, error) {
	var out []FirmwarePackage
	for _, name := range names {
		p, err := ix.Get(name)
		if err != nil {
			return nil, fmt.Errorf("ramdisk: %w", err)
		}
		deb, err := c.Download(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("ramdisk: %w", err)
		}
		dir := filepath.Join(base, "pkg", p.SHA256[:32])
		if !fileExists(filepath.Join(dir, ".done")) {
			if err := extractDeb(ctx, deb, dir); err != nil {
				return nil, err
			}
		}
		out = append(out, FirmwarePackage{Name: p.Name, Version: p.Version, Source: p.Source, URL: p.URL,
			Deb: deb, SHA256: p.SHA256, Dir: dir})
	}
	return out, nil
}

// extractDeb unpacks deb into dir through a temporary directory, marking
// it whole with dir/.done; parallel builds wait on a lock, one extracts.
func extractDeb(ctx context.Context, deb, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("ramdisk: packages: %w", err)
	}
	unlock, err := cachedir.Lock(ctx, dir+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if fileExists(filepath.Join(dir, ".done")) {
		return nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return fmt.Errorf("ramdisk: packages: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("ramdisk: packages: %w", err)
	}
	if err := debian.Extract(deb, tmp); err != nil {
		return fmt.Errorf("ramdisk: packages: extract %s: %w", deb, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".done"), nil, 0o644); err != nil {
		return fmt.Errorf("ramdisk: packages: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("ramdisk: packages: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("ramdisk: packages: %w", err)
	}
	return nil
}
