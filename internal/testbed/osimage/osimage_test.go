package osimage

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/mkfs"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage/grubimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

func need(t *testing.T) {
	t.Helper()
	if m := Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (test.sh APT_PACKAGES)", m)
	}
	for _, p := range []string{"/usr/bin/qemu-system-x86_64", qemu.OVMFCode} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("SKIPPED: needs qemu-system-x86 and ovmf (test.sh APT_PACKAGES): %v", err)
		}
	}
}

const (
	testHostname = "osimage-vm.example.org"
	testUserData = "#cloud-config\nruncmd:\n  - echo \"hello from user-data\"\n"
)

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
	if err := run(t.Context(), "", "xorriso", "-as", "mkisofs", "-quiet", "-R", "-J", "-V", "config-2", "-o", out, configDriveTree(t)); err != nil {
		t.Fatal(err)
	}
	return out
}

// fatConfigDrive is a config drive on FAT (as some tools make them),
// from the agent's FAT writer and mtools.
func fatConfigDrive(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "cd.fat")
	if err := sparse(out, 4<<20); err != nil {
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
	if err := run(t.Context(), "", "mcopy", "-s", "-i", out, filepath.Join(tree, "openstack"), "::/"); err != nil {
		t.Fatal(err)
	}
	return out
}

// bootDisk boots a machine of firmware fw whose first disk holds image and
// whose second (of kind cdKind) holds the config drive cd, and checks that
// the OS booted and read the drive.
func bootDisk(t *testing.T, fw, image, cd string, osKind, cdKind string) *qemu.VM {
	t.Helper()
	m := qemu.DefaultMachine(fw)
	m.Name = "osimage-" + fw
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
	if err := place(m.DiskPath("os"), image, 0); err != nil {
		t.Fatal(err)
	}
	if err := place(m.DiskPath("cd"), cd, 0); err != nil {
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
	r, err := WaitReport(ctx, vm)
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
	l, _ := vm.Find(Booted)
	t.Logf("%s: %.1fs from QEMU's start to the power-off; /init at %.1fs; config drive %s", fw, time.Since(start).Seconds(), l.At.Seconds(), r.Drive)
	return vm
}

func buildOS(t *testing.T) (*OS, string) {
	t.Helper()
	need(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	o, err := Build(ctx, dir)
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

// TestBIOSDiskBoots: SeaBIOS boots the MBR image from a virtio-blk disk,
// its GRUB the kernel, and the OS reads an ISO 9660 config drive on a
// SATA disk.
func TestBIOSDiskBoots(t *testing.T) {
	o, dir := buildOS(t)
	img := filepath.Join(dir, "bios.raw")
	if err := o.BIOSDisk(t.Context(), dir, img); err != nil {
		t.Fatal(err)
	}
	vm := bootDisk(t, "bios", img, isoConfigDrive(t), "virtio-blk", "ide-hd")
	if _, ok := vm.Find(LoaderLine); !ok {
		t.Error("GRUB's menu entry did not say it ran")
	}
}

// TestUEFIDiskBoots: OVMF, with no boot entry in its NVRAM, boots the
// GPT image's removable-media loader from a SCSI disk, and the OS reads a
// FAT config drive on an NVMe disk.
func TestUEFIDiskBoots(t *testing.T) {
	o, dir := buildOS(t)
	img := filepath.Join(dir, "uefi.raw")
	if err := o.UEFIDisk(t.Context(), dir, img); err != nil {
		t.Fatal(err)
	}
	vm := bootDisk(t, "uefi", img, fatConfigDrive(t), "scsi-hd", "nvme")
	if _, ok := vm.Find(LoaderLine); !ok {
		t.Error("GRUB's menu entry did not say it ran")
	}
}

// TestGuestPrintsTheMarkers: the guest (package main, which cannot be
// imported) spells each console line as this package matches it.
func TestGuestPrintsTheMarkers(t *testing.T) {
	src, err := os.ReadFile("guest/main.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{Booted, DriveLine, HostnameLine, UserDataLine, FailedLine, PoweringOff} {
		if !strings.Contains(string(src), strconv.Quote(m)) {
			t.Errorf("guest/main.go does not print %q", m)
		}
	}
}

// TestMBRSector: GRUB's boot code, then one active Linux partition at 1 MiB
// and the boot signature; the bytes GRUB's boot.img keeps for the BIOS
// parameter block and its own core image address stay as boot.img has
// them.
func TestMBRSector(t *testing.T) {
	boot := make([]byte, sector)
	for i := range boot {
		boot[i] = byte(i)
	}
	b := mbrSector(boot, 65536)
	if len(b) != sector || string(b[:440]) != string(boot[:440]) {
		t.Fatal("boot code not copied")
	}
	e := b[446:462]
	if e[0] != 0x80 || e[4] != 0x83 || binary.LittleEndian.Uint32(e[8:]) != firstLBA || binary.LittleEndian.Uint32(e[12:]) != 65536 {
		t.Errorf("partition entry % x", e)
	}
	if string(b[462:510]) != string(make([]byte, 48)) || b[510] != 0x55 || b[511] != 0xaa {
		t.Errorf("other entries or signature: % x", b[462:])
	}
}

// TestSoftwareRAIDBIOSDisk: the image for a software RAID deploy has no
// boot code (the holders get GRUB from the agent), one active Linux
// partition at 1 MiB with the ext4 root whose UUID it returns, and in
// that root the kernel grub-mkconfig lists and the mdadm grub-probe asks.
func TestSoftwareRAIDBIOSDisk(t *testing.T) {
	if m := grubimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (test.sh APT_PACKAGES)", m)
	}
	if _, err := exec.LookPath("debugfs"); err != nil {
		t.Skip("SKIPPED: needs debugfs (e2fsprogs, test.sh APT_PACKAGES)")
	}
	o, dir := buildOS(t)
	img := filepath.Join(dir, "raid.raw")
	const rootSize = 96 << 20
	uuid, err := o.SoftwareRAIDBIOSDisk(t.Context(), dir, img, rootSize)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != firstLBA*sector+rootSize {
		t.Errorf("image of %d bytes, want %d", len(b), firstLBA*sector+rootSize)
	}
	if string(b[:440]) != string(make([]byte, 440)) {
		t.Error("the image carries boot code")
	}
	e := b[446:462]
	if e[0] != 0x80 || e[4] != 0x83 || binary.LittleEndian.Uint32(e[8:]) != firstLBA || binary.LittleEndian.Uint32(e[12:]) != rootSize/sector {
		t.Errorf("partition entry % x", e)
	}
	root := filepath.Join(t.TempDir(), "root.ext4")
	if err := os.WriteFile(root, b[firstLBA*sector:], 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := blockdev.BlockUUID(root); err != nil || got != uuid {
		t.Errorf("the partition's file system UUID is %q (%v), want %q", got, err, uuid)
	}
	for _, f := range []string{"/usr/sbin/mdadm", "/boot/vmlinuz-" + grubimage.KernelVersion, "/boot/initrd.img-" + grubimage.KernelVersion, "/usr/sbin/grub-install"} {
		out, err := exec.CommandContext(t.Context(), "debugfs", "-R", "stat "+f, root).CombinedOutput()
		if err != nil || strings.Contains(string(out), "File not found") {
			t.Errorf("the root file system has no %s: %v: %s", f, err, out)
		}
	}
}
