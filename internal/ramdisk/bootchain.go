package ramdisk

import (
	"context"
	"fmt"
	"path/filepath"
)

// BootChain is Debian's signed UEFI boot chain: shim, signed by
// Microsoft's UEFI CA and trusting Debian's Secure Boot key, and GRUB,
// signed with Debian's key, which boots Debian's signed kernel. A
// firmware that enforces Secure Boot with Microsoft's keys enrolled runs
// shim, shim runs GRUB, GRUB (through shim's protocol) the kernel.
type BootChain struct {
	Shim string // shimx64.efi.signed
	// Grub is the GRUB for disks and CDs: it reads its grub.cfg from
	// GrubPrefix on the device it was loaded from.
	Grub string
	// GrubNet is the GRUB for network boot (grubnetx64.efi.signed).
	GrubNet string
	// Packages are the Debian packages the files come from.
	Packages []FirmwarePackage
}

// Debian's packages of the signed boot chain, and the files in them.
const (
	ShimPackage = "shim-signed"
	GrubPackage = "grub-efi-amd64-signed" // amd64 only: the arm64 chain is not built yet
	shimFile    = "usr/lib/shim/shimx64.efi.signed"
	grubFile    = "usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed"
	grubNetFile = "usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed"
)

// FetchBootChain downloads shim-signed and grub-efi-amd64-signed of kernel
// flavour f's suites (their highest versions, verified against the
// archive's signature as every package of the build) and extracts them
// below cacheDir/bootchain/<flavour>. The flavour's own release: its
// GRUB knows the kernel's format, and its shim's SBAT level admits its
// GRUB.
func FetchBootChain(ctx context.Context, cacheDir string, f KernelFlavour) (*BootChain, error) {
	c, ix, err := flavourIndex(ctx, cacheDir, f)
	if err != nil {
		return nil, err
	}
	pkgs, err := fetchPackages(ctx, c, ix, filepath.Join(cacheDir, "bootchain", f.Name), []string{ShimPackage, GrubPackage})
	if err != nil {
		return nil, fmt.Errorf("ramdisk: Secure Boot chain: %w", err)
	}
	bc := &BootChain{
		Shim:     filepath.Join(pkgs[0].Dir, shimFile),
		Grub:     filepath.Join(pkgs[1].Dir, grubFile),
		GrubNet:  filepath.Join(pkgs[1].Dir, grubNetFile),
		Packages: pkgs,
	}
	for _, p := range []struct{ path, pkg string }{{bc.Shim, ShimPackage}, {bc.Grub, GrubPackage}, {bc.GrubNet, GrubPackage}} {
		if !fileExists(p.path) {
			return nil, fmt.Errorf("ramdisk: Secure Boot chain: %s %s has no %s", p.pkg, f.Name, p.path)
		}
	}
	return bc, nil
}
