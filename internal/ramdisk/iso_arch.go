package ramdisk

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// GRUBDir returns GRUB's EFI image and module directory for f's
// architecture (usr/lib/grub/<platform> of Debian's grub-efi-<arch>-bin
// from f's suites, fetched and verified like the kernel), for an ISO of
// an architecture the build host's GRUB does not have: Debian ships an
// architecture's GRUB modules only in that architecture's package.
func GRUBDir(ctx context.Context, cacheDir string, f KernelFlavour) (string, error) {
	a, err := LookupArch(f.Arch)
	if err != nil {
		return "", err
	}
	c, ix, err := flavourIndex(ctx, cacheDir, f)
	if err != nil {
		return "", err
	}
	pkgs, err := fetchPackages(ctx, c, ix, filepath.Join(cacheDir, "grub"), []string{"grub-efi-" + a.Name + "-bin"})
	if err != nil {
		return "", err
	}
	dir := filepath.Join(pkgs[0].Dir, "usr/lib/grub", a.grubPlatform())
	if _, err := os.Stat(filepath.Join(dir, "modinfo.sh")); err != nil {
		return "", fmt.Errorf("ramdisk: %s ships no GRUB platform %s: %w", pkgs[0].Name, a.grubPlatform(), err)
	}
	return dir, nil
}

// grubPlatform is GRUB's name of a's EFI platform.
func (a Arch) grubPlatform() string {
	if a.Name == "amd64" {
		return "x86_64-efi"
	}
	return a.Name + "-efi"
}

// ISOForArch is ISOAt for architecture arch: for DefaultArch the same,
// with the host's GRUB; for another, a UEFI-only ISO made by the host's
// grub-mkrescue from grubDir (GRUBDir), with no console= parameter: the
// kernel takes its console from the firmware's tables (ACPI SPCR, the
// device tree's stdout-path), which is ttyAMA0 on one arm64 server and
// ttyS0 on another.
func ISOForArch(ctx context.Context, arch, grubDir, kernel, initrd, cmdline, out string, epoch time.Time) error {
	a, err := LookupArch(arch)
	if err != nil {
		return err
	}
	if a.Name == DefaultArch {
		return ISOAt(ctx, kernel, initrd, cmdline, out, epoch)
	}
	if grubDir == "" {
		return fmt.Errorf("ramdisk: an %s ISO needs GRUB's %s directory (GRUBDir)", a.Name, a.grubPlatform())
	}
	return isoAt(ctx, archISOPlatform(grubDir), kernel, initrd, cmdline, out, epoch)
}

// archISOPlatform is the ISO platform of an architecture other than
// DefaultArch: grubDir's GRUB, no console= parameter and no PC serial
// port in GRUB (pcSerialTerminal): the firmware's console is GRUB's.
func archISOPlatform(grubDir string) isoPlatform {
	return isoPlatform{grubDir: grubDir, needs: "needs xorriso, mtools and the host's grub-mkrescue (grub-common)"}
}
