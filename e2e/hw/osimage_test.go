package hw

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/mkfs"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

const (
	testHostname = "osimage-vm.example.org"
	testUserData = "#cloud-config\nruncmd:\n  - echo \"hello from user-data\"\n"
)

// osNeed skips the test when building or booting the OS needs what the
// host lacks.
func osNeed(t *testing.T) {
	t.Helper()
	if m := osimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (test.sh APT_PACKAGES)", m)
	}
	for _, p := range []string{"/usr/bin/qemu-system-x86_64", qemu.OVMFCode} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("SKIPPED: needs qemu-system-x86 and ovmf (test.sh APT_PACKAGES): %v", err)
		}
	}
}

func buildOS(t *testing.T) (*osimage.OS, string) {
	t.Helper()
	osNeed(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	o, err := osimage.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(o.Initrd)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("OS built in %.1fs: kernel %s, initramfs %.1f MiB", time.Since(start).Seconds(), o.KernelVersion, float64(st.Size())/(1<<20))
	return o, dir
}

// configDriveTree is openstack/latest as Ironic's config drive holds it.
func configDriveTree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cd")
	latest := filepath.Join(dir, "openstack", "latest")
	if err := os.MkdirAll(latest, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"meta_data.json": `{"uuid": "4c616273-0000-4000-8000-0000000000a1", "hostname": "` + testHostname + `", "name": "osimage-vm"}`,
		"user_data":      testUserData,
	} {
		if err := os.WriteFile(filepath.Join(latest, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// isoConfigDrive is the config drive as Ironic builds it: ISO 9660
// labelled config-2.
func isoConfigDrive(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("xorriso"); err != nil {
		t.Skip("SKIPPED: needs xorriso (test.sh APT_PACKAGES)")
	}
	out := filepath.Join(t.TempDir(), "cd.iso")
	if err := runCmd(t.Context(), "xorriso", "-as", "mkisofs", "-quiet", "-R", "-J", "-V", "config-2", "-o", out, configDriveTree(t)); err != nil {
		t.Fatal(err)
	}
	return out
}

// fatConfigDrive is a config drive on FAT (as some tools make them),
// from the agent's FAT writer and mtools.
func fatConfigDrive(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "cd.fat")
	if err := sparseFile(out, 4<<20); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(out, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mkfs.WriteFAT(f, 4<<20, mkfs.FATOptions{Label: "config-2", VolumeID: 0xc0f1_0002}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	tree := configDriveTree(t)
	if err := runCmd(t.Context(), "mcopy", "-s", "-i", out, filepath.Join(tree, "openstack"), "::/"); err != nil {
		t.Fatal(err)
	}
	return out
}

// bootDisk boots a machine of firmware fw whose first disk holds image and
// whose second (of kind cdKind) holds the config drive cd, and checks that
// the OS booted and read the drive.
func bootDisk(t *testing.T, fw qemu.Firmware, image, cd string, osKind, cdKind qemu.DiskKind) *qemu.VM {
	t.Helper()
	m := qemu.DefaultMachine(fw)
	m.Name = "osimage-" + string(fw)
	m.Dir = t.TempDir()
	// 512 MiB: GRUB's EFI loader runs out of memory for the kernel in 256.
	m.CPUs, m.MemoryMB, m.NICs = 1, 512, nil
	m.Disks = []qemu.Disk{
		{ID: "os", Kind: osKind, SizeMB: 64, Serial: "OSIMAGE-OS", WWN: "0x5000c500a1b2c301", Vendor: "LABVEND", Model: "OSIMAGE", BootFirst: true},
		{ID: "cd", Kind: cdKind, SizeMB: 16, Serial: "OSIMAGE-CD", WWN: "0x5000c500a1b2c302", Model: "OSIMAGE CD", AHCIPort: 2},
	}
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	if err := placeFile(m.DiskPath("os"), image, 0); err != nil {
		t.Fatal(err)
	}
	if err := placeFile(m.DiskPath("cd"), cd, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	start := time.Now()
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	r, err := osimage.WaitReport(ctx, vm)
	if err != nil {
		log, _ := os.ReadFile(vm.LogPath)
		t.Fatalf("%v\nserial console:\n%s", err, log)
	}
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Hostname != testHostname || r.UserData != testUserData || !r.HasUserData {
		t.Errorf("the OS read hostname %q, user-data %q (%v); want %q, %q", r.Hostname, r.UserData, r.HasUserData, testHostname, testUserData)
	}
	l, _ := vm.Find(osimage.Booted)
	t.Logf("%s: %.1fs from QEMU's start to the power-off; /init at %.1fs; config drive %s", fw, time.Since(start).Seconds(), l.At.Seconds(), r.Drive)
	return vm
}

// TestBIOSDiskBoots: SeaBIOS boots the MBR image from a virtio-blk disk,
// its GRUB the kernel, and the OS reads an ISO 9660 config drive on a
// SATA disk.
func TestBIOSDiskBoots(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	o, dir := buildOS(t)
	img := filepath.Join(dir, "bios.raw")
	if err := o.BIOSDisk(t.Context(), dir, img); err != nil {
		t.Fatal(err)
	}
	vm := bootDisk(t, "bios", img, isoConfigDrive(t), "virtio-blk", "ide-hd")
	if _, ok := vm.Find(osimage.LoaderLine); !ok {
		t.Error("GRUB's menu entry did not say it ran")
	}
}

// TestUEFIDiskBoots: OVMF, with no boot entry in its NVRAM, boots the
// GPT image's removable-media loader from a SCSI disk, and the OS reads a
// FAT config drive on an NVMe disk.
func TestUEFIDiskBoots(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	o, dir := buildOS(t)
	img := filepath.Join(dir, "uefi.raw")
	if err := o.UEFIDisk(t.Context(), dir, img); err != nil {
		t.Fatal(err)
	}
	vm := bootDisk(t, "uefi", img, fatConfigDrive(t), "scsi-hd", "nvme")
	if _, ok := vm.Find(osimage.LoaderLine); !ok {
		t.Error("GRUB's menu entry did not say it ran")
	}
}

// runCmd runs name args and fails with its output.
func runCmd(ctx context.Context, name string, args ...string) error {
	if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// placeFile writes the file src into the disk image at byte offset off.
func placeFile(disk, src string, off int64) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(disk, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sparseFile creates p as a sparse file of size bytes.
func sparseFile(p string, size int64) error {
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		return err
	}
	return os.Truncate(p, size)
}
