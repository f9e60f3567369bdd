package ramdisk

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Kernel is an extracted Debian kernel package.
type Kernel struct {
	Package    string // e.g. linux-image-6.1.0-48-amd64
	Version    string // e.g. 6.1.0-48-amd64 (uname -r)
	Vmlinuz    string // the bzImage
	ModulesDir string // lib/modules/<Version>
}

// CacheDir is where downloaded kernels are kept between runs: $IRONIC_AGENT_CACHE,
// else the user cache directory ($XDG_CACHE_HOME or ~/.cache) /ironic-agent.
func CacheDir() (string, error) {
	if d := os.Getenv("IRONIC_AGENT_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("ramdisk: no cache directory (set IRONIC_AGENT_CACHE): %w", err)
	}
	return filepath.Join(d, "ironic-agent"), nil
}

// run executes an external program (apt and dpkg have no Go equivalent) and
// puts its command line, exit status and stderr into the error.
func run(ctx context.Context, dir string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

var dependsRE = regexp.MustCompile(`(?m)^\s*Depends:\s*(linux-image-[0-9][^\s]*)`)

// ResolveKernelPackage returns the versioned kernel package the
// linux-image-amd64 meta package depends on (the current Debian kernel).
func ResolveKernelPackage(ctx context.Context) (string, error) {
	out, err := run(ctx, "", "apt-cache", "depends", "linux-image-amd64")
	if err != nil {
		return "", fmt.Errorf("ramdisk: resolve the kernel package (run apt-get update?): %w", err)
	}
	m := dependsRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("ramdisk: apt-cache depends linux-image-amd64 names no linux-image-<version> package:\n%s", out)
	}
	return string(m[1]), nil
}

// FetchKernel downloads pkg (or the current Debian kernel when pkg is "")
// with apt-get download into cacheDir/debs and extracts it into
// cacheDir/kernel/<version>. Both steps are skipped when already done, so CI
// downloads the package once per machine.
func FetchKernel(ctx context.Context, cacheDir, pkg string) (*Kernel, error) {
	var err error
	if pkg == "" {
		if pkg, err = ResolveKernelPackage(ctx); err != nil && os.Geteuid() == 0 {
			// A fresh machine (or container) may have no package lists yet.
			if _, uerr := run(ctx, "", "apt-get", "-o", "DPkg::Lock::Timeout=900", "update", "-qq"); uerr != nil {
				return nil, fmt.Errorf("%w; and %w", err, uerr)
			}
			pkg, err = ResolveKernelPackage(ctx)
		}
		if err != nil {
			return nil, err
		}
	}
	ver := strings.TrimSuffix(strings.TrimPrefix(pkg, "linux-image-"), "-unsigned")
	k := &Kernel{Package: pkg, Version: ver}
	dest := filepath.Join(cacheDir, "kernel", ver)
	k.Vmlinuz = filepath.Join(dest, "vmlinuz")
	k.ModulesDir = filepath.Join(dest, "lib/modules", ver)
	if fileExists(k.Vmlinuz) && fileExists(filepath.Join(k.ModulesDir, "modules.order")) {
		return k, nil
	}
	debs := filepath.Join(cacheDir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	deb, err := findDeb(debs, pkg)
	if err != nil {
		return nil, err
	}
	if deb == "" {
		// apt drops privileges to _apt for downloads when it can; let it
		// write here, or it warns and downloads as root anyway.
		_ = os.Chmod(debs, 0o777)
		if _, err := run(ctx, debs, "apt-get", "download", pkg); err != nil {
			return nil, fmt.Errorf("ramdisk: download the kernel: %w", err)
		}
		if deb, err = findDeb(debs, pkg); err != nil {
			return nil, err
		}
		if deb == "" {
			return nil, fmt.Errorf("ramdisk: apt-get download %s left no %s_*.deb in %s", pkg, pkg, debs)
		}
	}
	tmp := dest + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	x := filepath.Join(tmp, "x")
	if err := os.MkdirAll(x, 0o755); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	if _, err := run(ctx, "", "dpkg-deb", "-x", deb, x); err != nil {
		return nil, fmt.Errorf("ramdisk: extract the kernel: %w", err)
	}
	if err := os.Rename(filepath.Join(x, "boot", "vmlinuz-"+ver), filepath.Join(tmp, "vmlinuz")); err != nil {
		return nil, fmt.Errorf("ramdisk: %s has no boot/vmlinuz-%s: %w", deb, ver, err)
	}
	// bookworm ships /lib/modules, later releases /usr/lib/modules.
	mods := filepath.Join(x, "lib/modules", ver)
	if !fileExists(mods) {
		mods = filepath.Join(x, "usr/lib/modules", ver)
	}
	if err := os.MkdirAll(filepath.Join(tmp, "lib/modules"), 0o755); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	if err := os.Rename(mods, filepath.Join(tmp, "lib/modules", ver)); err != nil {
		return nil, fmt.Errorf("ramdisk: %s has no modules for %s: %w", deb, ver, err)
	}
	if err := os.RemoveAll(x); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	if err := os.RemoveAll(dest); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return nil, fmt.Errorf("ramdisk: %w", err)
	}
	if !fileExists(filepath.Join(k.ModulesDir, "modules.order")) {
		return nil, fmt.Errorf("ramdisk: %s has no modules.order", k.ModulesDir)
	}
	return k, nil
}

func findDeb(dir, pkg string) (string, error) {
	m, err := filepath.Glob(filepath.Join(dir, pkg+"_*.deb"))
	if err != nil {
		return "", fmt.Errorf("ramdisk: %w", err)
	}
	if len(m) == 0 {
		return "", nil
	}
	return m[len(m)-1], nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
