package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/efivar/efivartest"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/inventory"
)

// TestInstallBootloaderUEFI runs the UEFI path on a real loop device with a
// real VFAT ESP; only efivarfs is a stand-in directory (this machine's
// NVRAM is not ours to change). TestVMDeployUEFI (e2e/vm) writes real NVRAM
// and boots from it.
func TestInstallBootloaderUEFI(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: loop devices and mounting a VFAT ESP")
	}
	looptest.RequireTools(t, "sgdisk", "mkfs.vfat", "losetup", "partx")
	if fss, _ := os.ReadFile("/proc/filesystems"); !bytes.Contains(fss, []byte("\tvfat\n")) {
		t.Skip("SKIPPED: this kernel cannot mount vfat (no vfat in /proc/filesystems); TestRegisterEFI covers the NVRAM part, TestVMDeployUEFI (e2e/vm) all of it")
	}
	loop := looptest.Attach(t, 64<<20, "--partscan")
	// Partition the attached device, then have the kernel add the
	// partitions (sgdisk's re-read request is not always honoured here).
	looptest.Run(t, "sgdisk", "-n", "1:2048:+32M", "-t", "1:ef00", "-n", "2:0:0", "-t", "2:8300", loop)
	looptest.Run(t, "partx", "-u", loop)
	part := loop + "p1"
	looptest.WaitFor(t, part)
	looptest.Run(t, "mkfs.vfat", part)
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.MkdirAll(mnt, 0o755)
	looptest.Run(t, "mount", part, mnt)
	os.MkdirAll(filepath.Join(mnt, "EFI/debian"), 0o755)
	os.WriteFile(filepath.Join(mnt, "EFI/debian/shimx64.efi"), []byte("MZ"), 0o755)
	os.WriteFile(filepath.Join(mnt, "EFI/debian/BOOTX64.CSV"), efivartest.UTF16LE("shimx64.efi,debian,,This is the boot entry for debian\n"), 0o644)
	looptest.Run(t, "umount", mnt)

	s := efivartest.FakeNVRAM(t)

	inv := func(ctx context.Context) (*inventory.Inventory, error) {
		i, err := testInventory(ctx)
		i.Boot.CurrentBootMode = "uefi"
		return i, err
	}
	ra := standalone(t, Options{EFIVars: s.Dir, Hooks: Hooks{Inventory: inv}}, map[string]string{"allowed_devices": loop})
	_, r := call(t, ra, "poll.set_node_info", map[string]any{"node_info": map[string]any{
		"node": map[string]any{"uuid": "u-1", "properties": map[string]any{"root_device": map[string]any{"name": loop}}}}})
	if r["command_status"] != "SUCCEEDED" {
		t.Fatalf("set_node_info %v", r)
	}
	_, r = call(t, ra, "image.install_bootloader", map[string]any{"root_uuid": nil, "efi_system_part_uuid": nil, "prep_boot_part_uuid": nil, "target_boot_mode": "uefi"})
	if r["command_status"] != "SUCCEEDED" {
		t.Fatalf("install_bootloader %v", r)
	}
	out := efivartest.NVRAM(t, s)
	if !strings.HasPrefix(out, "BootOrder [0000 0002]\nBoot0000 debian HD(1,GPT,") || !strings.Contains(out, `,0x800,0x10000)/File(\EFI\debian\shimx64.efi)`) {
		t.Errorf("NVRAM after install_bootloader:\n%s", out)
	}
}
