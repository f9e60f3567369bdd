package ramdisk

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// grubBIOSDir is Debian's grub-pc-bin: the ISO's BIOS boot, as
// grub-mkrescue builds it.
const grubBIOSDir = "/usr/lib/grub/i386-pc"

// SecureBootISO is ISOAt with esp (ESP) as the ISO's UEFI El Torito image
// (and its GPT partition, for the ISO written to a stick): Debian's signed
// shim and GRUB, which a firmware enforcing Secure Boot with Microsoft's
// keys runs, and which boot the signed kernel. The BIOS entry is
// grub-mkrescue's, as ISOAt's; ISOAt's UEFI entry is an unsigned GRUB
// grub-mkrescue builds, which such a firmware refuses.
func SecureBootISO(ctx context.Context, kernel, initrd, cmdline, esp, out string, epoch time.Time) error {
	if esp == "" {
		return fmt.Errorf("ramdisk: Secure Boot ISO: no ESP image")
	}
	return isoAt(ctx, defaultISOPlatform(esp), kernel, initrd, cmdline, out, epoch)
}

// espISOPath is where the ESP image is in the ISO 9660 tree.
const espISOPath = "boot/" + ESPName

// secureBootStage adds the ESP esp and the GRUB configuration cfg where
// its GRUB reads it (GrubConfigPath: GRUB's device, booted from a CD, is
// the CD) to the ISO tree stage, and returns the arguments that make
// grub-mkrescue build the BIOS entry only and xorriso boot UEFI from the
// ESP. Nothing for esp "".
func secureBootStage(stage, cfg, esp string) (mkrescue, xorriso []string, err error) {
	if esp == "" {
		return nil, nil, nil
	}
	if _, err := os.Stat(grubBIOSDir); err != nil {
		return nil, nil, fmt.Errorf("ramdisk: ISO: the BIOS entry needs grub-pc-bin: %w", err)
	}
	if err := copyFile(esp, filepath.Join(stage, espISOPath)); err != nil {
		return nil, nil, err
	}
	p := filepath.Join(stage, GrubConfigPath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, nil, fmt.Errorf("ramdisk: %w", err)
	}
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		return nil, nil, fmt.Errorf("ramdisk: %w", err)
	}
	// xorriso's own commands (grub-mkrescue passes what follows its "--"
	// on after leaving mkisofs emulation): a second El Torito image for
	// UEFI, and the ESP as a GPT partition too.
	return []string{"-d", grubBIOSDir}, []string{"-boot_image", "any", "next",
		"-boot_image", "any", "efi_path=/" + espISOPath, "-boot_image", "any", "efi_boot_part=--efi-boot-image"}, nil
}
