package ramdisk

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
)

// KernelFlavour is a Debian release whose kernel the ramdisk carries: the
// linux-image-amd64 of its suites, and the firmware of the same suites,
// so a driver finds the firmware files its own release ships.
type KernelFlavour struct {
	Name string // what mkramdisk -kernel, make ramdisk KERNEL= and RAMDISK_KERNEL take
	// Suites are the archive suites the kernel and firmware come from;
	// one ending in -security is taken from the host's security mirror.
	// With several, the highest version of a package wins.
	Suites []string
	About  string // for the operator: which kernel, and when to pick it
}

// DefaultKernelFlavour is the newest Debian stable release's kernel.
const DefaultKernelFlavour = "trixie"

// KernelFlavours returns the kernels a ramdisk can be built with.
func KernelFlavours() []KernelFlavour {
	return []KernelFlavour{
		{Name: "bookworm", Suites: []string{"bookworm", "bookworm-updates", "bookworm-security"},
			About: "Debian 12's kernel (6.1 LTS): for a fleet validated on it"},
		{Name: "trixie", Suites: []string{"trixie", "trixie-updates", "trixie-security"},
			About: "Debian 13's kernel (6.12 LTS), the newest Debian stable: the default"},
		{Name: "newest", Suites: []string{"trixie-backports", "forky"},
			About: "the higher-versioned kernel of trixie-backports and forky (testing): for hardware the stable kernels do not drive yet; no security support from Debian's security team"},
	}
}

// LookupKernelFlavour returns the flavour called name ("" for the default).
func LookupKernelFlavour(name string) (KernelFlavour, error) {
	if name == "" {
		name = DefaultKernelFlavour
	}
	var names []string
	for _, f := range KernelFlavours() {
		if f.Name == name {
			return f, nil
		}
		names = append(names, f.Name)
	}
	return KernelFlavour{}, fmt.Errorf("ramdisk: unknown kernel flavour %q (want one of %s)", name, strings.Join(names, ", "))
}

// flavourSources returns the one-line sources (without components) for
// f's suites on the host's Debian mirrors (HostDebianSources): each suite
// on every mirror of the host's kind for it, the security archive (a host
// suite ending in -security) for a -security suite, the main archive for
// the others. A kind the host has no mirror for is an error: the build
// would otherwise miss the security updates without a word.
func flavourSources(hostSrcs []string, f KernelFlavour) ([]string, error) {
	var archive, security []string
	for _, s := range hostSrcs {
		i := strings.LastIndexByte(s, ' ')
		if i < 0 {
			continue
		}
		prefix, suite := s[:i], s[i+1:]
		list := &archive
		if strings.HasSuffix(suite, "-security") {
			list = &security
		}
		if !slices.Contains(*list, prefix) {
			*list = append(*list, prefix)
		}
	}
	var out []string
	for _, suite := range f.Suites {
		list, kind := archive, "Debian archive"
		if strings.HasSuffix(suite, "-security") {
			list, kind = security, "Debian security archive (a *-security suite)"
		}
		if len(list) == 0 {
			return nil, fmt.Errorf("ramdisk: kernel flavour %s needs suite %s, and the host's /etc/apt names no %s to take it from", f.Name, suite, kind)
		}
		for _, p := range list {
			out = append(out, p+" "+suite)
		}
	}
	return out, nil
}

// aptListsMaxAge is how long a flavour's package lists are used before
// apt-get update fetches them again: a day, so a build picks up a new
// kernel upload and the VM tests of one run all boot the same kernel.
const aptListsMaxAge = 24 * time.Hour

// flavourApt returns the private apt directory of flavour f below
// cacheDir/apt/<name>, its sources (components main and
// non-free-firmware) on the host's mirrors, every suite pinned alike so
// the highest version wins, and its lists fetched when missing or older
// than aptListsMaxAge. Parallel builds wait on a lock: one updates.
func flavourApt(ctx context.Context, cacheDir string, f KernelFlavour) (string, error) {
	hostSrcs, err := HostDebianSources("/etc/apt")
	if err != nil {
		return "", err
	}
	srcs, err := flavourSources(hostSrcs, f)
	if err != nil {
		return "", err
	}
	aptDir := filepath.Join(cacheDir, "apt", f.Name)
	if err := os.MkdirAll(aptDir, 0o755); err != nil {
		return "", fmt.Errorf("ramdisk: %w", err)
	}
	unlock, err := cachedir.Lock(ctx, filepath.Join(aptDir, "lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	list, err := writeSources(aptDir, srcs, firmwareDebianComponents)
	if err != nil {
		return "", err
	}
	if err := writePreferences(aptDir, f.Suites); err != nil {
		return "", err
	}
	stamp := filepath.Join(aptDir, "updated")
	want := listsKey(list, f.Suites)
	if st, err := os.Stat(stamp); err == nil && time.Since(st.ModTime()) < aptListsMaxAge {
		if b, err := os.ReadFile(stamp); err == nil && string(b) == want {
			return aptDir, nil
		}
	}
	if _, err := run(ctx, "", "apt-get", append(privateApt(aptDir), "-qq", "update")...); err != nil {
		return "", fmt.Errorf("ramdisk: kernel flavour %s: package lists for %s: %w", f.Name, list, err)
	}
	if err := os.WriteFile(stamp, []byte(want), 0o644); err != nil {
		return "", fmt.Errorf("ramdisk: %w", err)
	}
	return aptDir, nil
}

// listsKey is what the lists were fetched for: a changed sources.list
// (another mirror, another suite) fetches them again.
func listsKey(sourcesList string, suites []string) string {
	b, _ := os.ReadFile(sourcesList)
	return string(b) + "\n" + strings.Join(suites, " ") + "\n"
}

// writePreferences pins every suite at the same priority: backports
// suites are NotAutomatic (priority 1 or 100), so without this apt would
// never take their newer kernel.
func writePreferences(aptDir string, suites []string) error {
	if err := os.MkdirAll(filepath.Join(aptDir, "preferences.d"), 0o755); err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	var b strings.Builder
	for _, s := range suites {
		fmt.Fprintf(&b, "Package: *\nPin: release n=%s\nPin-Priority: 500\n\n", s)
	}
	if err := os.WriteFile(filepath.Join(aptDir, "preferences"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("ramdisk: %w", err)
	}
	return nil
}
