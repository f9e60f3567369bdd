package ramdisk_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/ata"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/metric"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
	"github.com/ironic-go/ironic-agent/inventory"
)

// TestArm64InventoryInVM boots the arm64 ramdisk (the agent cross-built,
// Debian's arm64 kernel, modules, firmware and programs) on QEMU's virt
// machine with AAVMF under TCG, and runs `ironic-agent capture-fixture`
// there: the inventory must say what QEMU was told. The CPU is the
// Cortex-A57 lscpu names from its MIDR, with the Features of
// /proc/cpuinfo as flags; the SMBIOS identities; every disk (virtio-blk,
// scsi-hd on virtio-scsi, NVMe, SATA on a PCI AHCI controller) with its
// serial and size;
// every NIC with its MAC; boot mode uefi. It reports the time from QEMU's
// start to the inventory's upload as vm.arm64.boot_to_inventory_s.
// Emulating a whole other instruction set takes minutes, so it runs with
// E2E_VM_SLOW=1 (docs/testing.md).
func TestArm64InventoryInVM(t *testing.T) {
	skipUnlessArm64VM(t)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	start := time.Now()
	rd, err := qemu.BuildRamdiskArch(ctx, qemu.Arm64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("arm64 ramdisk (kernel %s) in %s", rd.KernelPackage, time.Since(start).Round(time.Second))
	m := qemu.Arm64Machine()
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.Kernel, m.Initrd = rd.Kernel, rd.Initrd
	vm, tgz, err := qemu.RunUpload(ctx, m, "capture-fixture", "/run/capture", qemu.Options{})
	if vm != nil {
		t.Cleanup(vm.Kill)
		t.Logf("VM: %s from start to power-off; serial console in %s", vm.Elapsed().Round(time.Second), vm.LogPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := vm.Find("uploaded"); ok {
		t.Log(metric.New("vm.arm64.boot_to_inventory_s", l.At.Seconds(), "s"))
	} else {
		t.Errorf("no %q line on the console", "uploaded")
	}
	dir := t.TempDir()
	if err := qemu.ExtractTarGz(bytes.NewReader(tgz), dir); err != nil {
		t.Fatal(err)
	}
	var inv inventory.Inventory
	qemu.ReadJSON(t, filepath.Join(dir, "inventory.json"), &inv)
	checkArm64Inventory(t, m, inv)
}

// checkArm64Inventory compares inv with what m told QEMU.
func checkArm64Inventory(t *testing.T, m qemu.Machine, inv inventory.Inventory) {
	t.Helper()
	c := inv.CPU
	t.Logf("cpu %q arch %s count %d sockets %d flags %v", c.ModelName, c.Architecture, c.Count, c.SocketCount, c.Flags)
	if c.ModelName != "Cortex-A57" || c.Architecture != "aarch64" || c.Count != m.CPUs {
		t.Errorf("cpu: model %q arch %q count %d, want Cortex-A57 aarch64 %d", c.ModelName, c.Architecture, c.Count, m.CPUs)
	}
	// QEMU's Cortex-A57: ARMv8.0 with the crypto extensions.
	for _, f := range []string{"fp", "asimd", "aes", "pmull", "sha1", "sha2", "crc32", "cpuid"} {
		if !slices.Contains(c.Flags, f) {
			t.Errorf("cpu flags %v lack %s", c.Flags, f)
		}
	}
	sv, s := inv.SystemVendor, m.SMBIOS
	t.Logf("system %+v", sv)
	// IPA's product_name: the product, then the SKU in parentheses.
	product := s.SystemProduct + " (" + s.SKU + ")"
	if sv.Manufacturer != s.SystemManufacturer || sv.ProductName != product || sv.SerialNumber != s.SystemSerial {
		t.Errorf("system vendor %+v, want %s, %s, %s", sv, s.SystemManufacturer, product, s.SystemSerial)
	}
	if fw := sv.Firmware; fw.Vendor != s.BIOSVendor || fw.Version != s.BIOSVersion || fw.BuildDate != s.BIOSDate {
		t.Errorf("firmware %+v, want %s %s %s", fw, s.BIOSVendor, s.BIOSVersion, s.BIOSDate)
	}
	if inv.Boot.CurrentBootMode != "uefi" {
		t.Errorf("boot mode %q, want uefi", inv.Boot.CurrentBootMode)
	}
	if want := int64(m.MemoryMB) << 20; inv.Memory.Total == nil || *inv.Memory.Total <= 0 || *inv.Memory.Total > want {
		t.Errorf("memory total %v, want up to %d", inv.Memory.Total, want)
	}
	if len(inv.Disks) != len(m.Disks) {
		t.Errorf("the inventory lists %d disks, the machine has %d", len(inv.Disks), len(m.Disks))
	}
	for _, d := range m.Disks {
		i := slices.IndexFunc(inv.Disks, func(g inventory.Disk) bool { return g.Serial != nil && *g.Serial == d.Serial })
		if i < 0 {
			t.Errorf("disk %s (%s, serial %s): not in the inventory", d.ID, d.Kind, d.Serial)
			continue
		}
		g := inv.Disks[i]
		t.Logf("disk %-10s %s: size %d serial %s wwn %v model %v rotational %v", d.Kind, g.Name, g.Size, *g.Serial, deref(g.WWN), deref(g.Model), g.Rotational)
		if g.Size != int64(d.SizeMB)<<20 {
			t.Errorf("%s: size %d, want %d", d.ID, g.Size, int64(d.SizeMB)<<20)
		}
		if d.WWN != "" && deref(g.WWN) != d.WWN {
			t.Errorf("%s: wwn %q, want %s (from the SCSI VPD pages, read with SG_IO)", d.ID, deref(g.WWN), d.WWN)
		}
		if d.Kind == qemu.DiskSCSI && deref(g.Model) != d.Model {
			t.Errorf("%s: model %q, want %s", d.ID, deref(g.Model), d.Model)
		}
		if want := d.Kind != qemu.DiskNVMe && d.Kind != qemu.DiskVirtioBlk && d.RotationRate != 1; d.Kind == qemu.DiskSCSI && g.Rotational != want {
			t.Errorf("%s: rotational %v, want %v", d.ID, g.Rotational, want)
		}
	}
	for _, n := range m.NICs {
		if !slices.ContainsFunc(inv.Interfaces, func(i inventory.Interface) bool { return i.MACAddress == n.MAC }) {
			t.Errorf("NIC %s %s: not in the inventory", n.Model, n.MAC)
		}
	}
}

// TestArm64NVMeInVM sends deploy/nvme's admin commands, cross-built for
// arm64 (internal/testbed/guest/nvme as /init), to QEMU's NVMe
// controller on the arm64 virt machine through the guest kernel's
// NVME_IOCTL_ID and NVME_IOCTL_ADMIN_CMD, whose numbers internal/ioctl
// computes for arm64, then runs erase_devices on the namespace: Identify
// must return the serial QEMU was given and the namespace's size, and
// the erase must take the Format NVM the controller offers. E2E_VM_SLOW=1
// too.
func TestArm64NVMeInVM(t *testing.T) {
	skipUnlessArm64VM(t)
	dir := runArm64Guest(t, "nvme", "nvme", "/run/nvme", qemu.Disk{ID: "nvme", Kind: qemu.DiskNVMe, SizeMB: 64, Serial: "LAB-NVME-A64"})
	var rep struct {
		Controller struct {
			SerialNumber string
			VendorID     uint16
		}
		NSID      uint32
		Namespace struct{ Size, BlockSize uint64 }
	}
	qemu.ReadJSON(t, filepath.Join(dir, "controller.json"), &rep)
	t.Logf("controller %+v, nsid %d, namespace %+v", rep.Controller, rep.NSID, rep.Namespace)
	if rep.Controller.SerialNumber != "LAB-NVME-A64" || rep.Controller.VendorID != 0x1b36 {
		t.Errorf("Identify Controller %+v, want QEMU's (vendor 0x1b36) with serial LAB-NVME-A64", rep.Controller)
	}
	if rep.NSID != 1 || rep.Namespace.BlockSize == 0 || rep.Namespace.Size*rep.Namespace.BlockSize != 64<<20 {
		t.Errorf("namespace %d %+v, want nsid 1 of 64 MiB", rep.NSID, rep.Namespace)
	}
	var er struct {
		Results map[string]struct{ Method string }
		Error   string
	}
	qemu.ReadJSON(t, filepath.Join(dir, "erase_devices.json"), &er)
	if r := er.Results["/dev/nvme0n1"]; er.Error != "" || r.Method == "" {
		t.Errorf("erase_devices in the arm64 guest: %+v %q", er.Results, er.Error)
	}
	t.Logf("erase_devices: %+v", er.Results)
}

// runArm64Guest boots internal/testbed/guest/<guest>, cross-built for
// arm64, as the /init of the arm64 ramdisk on Arm64Machine with one NIC
// and disk, runs its command cmd writing dir, and returns the upload,
// unpacked.
func runArm64Guest(t *testing.T, guest, cmd, dir string, disk qemu.Disk) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	rd, err := qemu.BuildGuestRamdiskArch(ctx, qemu.Arm64, "./internal/testbed/guest/"+guest, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := qemu.Arm64Machine()
	m.Name = "ironic-agent-arm64-" + guest
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.NICs = m.NICs[:1]
	m.Disks = []qemu.Disk{disk}
	m.Kernel, m.Initrd = rd.Kernel, rd.Initrd
	vm, tgz, err := qemu.RunUpload(ctx, m, cmd, dir, qemu.Options{})
	if vm != nil {
		t.Cleanup(vm.Kill)
		t.Logf("VM: %s; serial console in %s", vm.Elapsed().Round(time.Second), vm.LogPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := qemu.ExtractTarGz(bytes.NewReader(tgz), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// skipUnlessArm64VM skips unless an arm64 VM can boot here and the slow
// scenarios are asked for.
func skipUnlessArm64VM(t *testing.T) {
	t.Helper()
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine (minutes under TCG)")
	}
	if os.Getenv("E2E_VM_SLOW") != "1" {
		t.Skip("SKIPPED: slow scenario (an arm64 VM under TCG); E2E_VM_SLOW=1 runs it (docs/testing.md: Environment switches)")
	}
	if _, err := exec.LookPath("qemu-system-aarch64"); err != nil {
		t.Skip("SKIPPED: needs qemu-system-aarch64 (./test.sh installs qemu-system-arm)")
	}
	if _, err := os.Stat(qemu.AAVMFCode); err != nil {
		t.Skip("SKIPPED: needs AAVMF (./test.sh installs qemu-efi-aarch64)")
	}
}

// TestArm64ATAInVM sends deploy/ata's commands, cross-built for arm64
// (internal/testbed/guest/ata as /init), to a SATA disk on an AHCI
// controller of the arm64 virt machine through the guest kernel's SG_IO
// (ATA PASS-THROUGH): IDENTIFY DEVICE must return the model and serial
// QEMU was given, and the security command QEMU lacks must come back as
// the drive's abort, read from the SCSI status and sense bytes.
// E2E_VM_SLOW=1 too.
func TestArm64ATAInVM(t *testing.T) {
	skipUnlessArm64VM(t)
	disk := qemu.Disk{ID: "sata", Kind: qemu.DiskSATA, SizeMB: 8, Serial: "LAB-SATA-A64", WWN: "0x5000cca000000c01",
		Model: "LAB SATA A64", AHCIPort: 0, RotationRate: 1}
	dir := runArm64Guest(t, "ata", "record", "/run/ata", disk) // records, erases nothing
	b, err := os.ReadFile(filepath.Join(dir, "sda.identify"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := ata.ParseIdentify(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("IDENTIFY: model %q serial %q security %s", id.Model(), id.Serial(), id.Security())
	if id.Model() != disk.Model || id.Serial() != disk.Serial {
		t.Errorf("IDENTIFY through SG_IO: model %q serial %q, want %q %q", id.Model(), id.Serial(), disk.Model, disk.Serial)
	}
	var hdr struct {
		Status       byte   `json:"status"`
		HostStatus   uint16 `json:"host_status"`
		DriverStatus uint16 `json:"driver_status"`
	}
	qemu.ReadJSON(t, filepath.Join(dir, "sda.unlock.json"), &hdr)
	sense, err := os.ReadFile(filepath.Join(dir, "sda.unlock.sense"))
	if err != nil {
		t.Fatal(err)
	}
	err = ata.Check("/dev/sda", ata.OpSecurityUnlock, ata.Reply{Status: hdr.Status, HostStatus: hdr.HostStatus, DriverStatus: hdr.DriverStatus, Sense: sense})
	if ce := (*ata.CommandError)(nil); !errors.As(err, &ce) || !ce.Aborted() {
		t.Errorf("SECURITY UNLOCK on a drive without the feature set: %v, want the drive's abort", err)
	}
}

// TestArm64ISOInVM builds the arm64 ISO as the release does (GRUB's
// arm64-efi from Debian's grub-efi-arm64-bin, the host's grub-mkrescue)
// and boots it from a CD on the arm64 virt machine under AAVMF, as
// virtual media: GRUB must start the kernel with the ISO's parameters
// and the console the firmware's SPCR names, and the agent's init must
// start on the arm64 kernel (its first line). E2E_VM_SLOW=1 too.
func TestArm64ISOInVM(t *testing.T) {
	skipUnlessArm64VM(t)
	for _, p := range []string{"grub-mkrescue", "xorriso", "mformat"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (grub-common, xorriso, mtools; in test.sh)", p)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	rd, err := qemu.BuildRamdiskArch(ctx, qemu.Arm64)
	if err != nil {
		t.Fatal(err)
	}
	grub, err := qemu.GRUBDir(ctx, qemu.Arm64)
	if err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(t.TempDir(), "arm64.iso")
	if err := ramdisk.ISOForArch(ctx, qemu.Arm64, grub, rd.Kernel, rd.Initrd, "", iso, time.Time{}); err != nil {
		t.Fatal(err)
	}
	m := qemu.Arm64Machine()
	m.Name = "ironic-agent-arm64-iso"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.NICs = m.NICs[:1]
	m.Disks = nil
	m.ISO = iso
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	l, err := vm.WaitFor(ctx, "Kernel command line:")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1fs: %s", l.At.Seconds(), l.Text)
	if !strings.Contains(l.Text, "boot_method=vmedia") || strings.Contains(l.Text, "console=") {
		t.Errorf("kernel command line %q: want the ISO's boot_method=vmedia and no console=", l.Text)
	}
	if l, err = vm.WaitFor(ctx, logtext.Msg(rdinit.EventVersion)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1fs: %s", l.At.Seconds(), l.Text)
	if !strings.Contains(l.Text, "-arm64 ") {
		t.Errorf("the init's first line %q names no arm64 kernel", l.Text)
	}
}
