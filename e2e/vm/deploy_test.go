package vm

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/deploy/mkfs"
	"github.com/ironic-go/ironic-agent/e2e/ironictest"
	"github.com/ironic-go/ironic-agent/internal/vmtest"
)

// deployTarget is the serial of the disk the root-device hint names.
const deployTarget = "LAB-SCSI-0002"

// deployCase is what a BIOS and a UEFI deploy do differently.
type deployCase struct {
	firmware string
	macs     [2]string
	port     int            // agent API hostfwd
	props    map[string]any // node properties over ironictest's defaults
	// management replaces the fake management interface when set.
	management string
	image      []byte
	// adjust changes the machine before it boots, if set.
	adjust func(*vmtest.Machine)
	// same are the byte ranges of the image the disk must hold unchanged.
	same [][2]int
}

// deployVM is scenario (d): a direct deploy of an available node whose
// ramdisk is the VM. The agent writes c.image to the disk the root-device
// hint names by serial, Ironic has it power the VM off, and the host finds
// the image's bytes in that disk's file and nowhere else. It returns the
// powered-off machine, disks and NVRAM as the deploy left them.
func deployVM(t *testing.T, c deployCase) vmtest.Machine {
	rd := ramdisk(t)
	s := services(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	m := serviceMachine(t, rd, c.firmware, c.port, c.macs)
	if c.adjust != nil {
		c.adjust(&m)
	}
	// As Ironic boots a deploy ramdisk: no inspection callback.
	m.Append = agentArgs(c.port) + " ironic_agent.dhcp=" + c.macs[0]

	// Available without cleaning: this test is about the deploy.
	noClean := false
	node := enroll(t, ctx, s, ironictest.NodeSpec{Name: "vm-deploy-" + c.firmware, AutomatedClean: &noClean, Properties: c.props}, c.macs)
	if c.management != "" {
		if err := nodes.Update(ctx, s.ironic.Service, node.UUID, nodes.UpdateOpts{
			nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/management_interface", Value: c.management},
		}).Err; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ironic.Provision(ctx, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetProvide}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, node.UUID, "available", time.Minute); err != nil {
		t.Fatal(err)
	}

	img := c.image
	ops := append(serveImage(t, &m, img),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"serial": deployTarget}},
	)
	if err := nodes.Update(ctx, s.ironic.Service, node.UUID, ops).Err; err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.ironic.Provision(ctx, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetActive}); err != nil {
		t.Fatal(err)
	}
	// Power on once Ironic has "rebooted" the node into the ramdisk.
	if _, err := s.ironic.WaitState(ctx, node.UUID, "wait call-back", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	vm := boot(t, ctx, m, vmtest.Options{})
	if _, err := s.ironic.WaitState(ctx, node.UUID, "active", 6*time.Minute); err != nil {
		t.Fatal(err)
	}
	hb := "?"
	if l, ok := vm.Find("heartbeat successful"); ok {
		hb = fmt.Sprintf("%.1fs", l.At.Seconds())
	}
	t.Logf("deploy (%s): %.1fs to active; boot to first heartbeat %s after QEMU started (agent started at guest uptime %s)",
		c.firmware, time.Since(start).Seconds(), hb, uptimeAt(vm, "agent started"))
	// Ironic ends the deploy by asking the agent to power off.
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var disk string
	for _, d := range m.Disks {
		if d.Serial == deployTarget {
			disk = m.DiskPath(d.ID)
		}
	}
	got := readAt(t, disk, 0, len(img))
	for _, r := range c.same {
		if a, b := got[r[0]:r[1]], img[r[0]:r[1]]; !bytes.Equal(a, b) {
			n := 0
			for n < len(a) && a[n] == b[n] {
				n++
			}
			t.Errorf("%s does not hold the image: first difference at byte %d", disk, r[0]+n)
		}
	}
	// Both images hold random bytes 1 MiB before their end, which a disk
	// the image did not go to (zeros) cannot.
	off := len(img) - 1<<20
	for _, d := range m.Disks {
		if d.Serial != deployTarget && bytes.Equal(readAt(t, m.DiskPath(d.ID), int64(off), 4096), img[off:off+4096]) {
			t.Errorf("the image also went to %s (%s)", d.ID, d.Serial)
		}
	}
	return m
}

// serveImage serves img for the guest of m and returns the node updates
// that deploy it. The image server doubles as the HTTP proxy the agent is
// told to use (driver_info image_http_proxy): Ironic checks the URL on
// 127.0.0.1 itself, and the guest reaches it through the proxy's
// guestfwd.
func serveImage(t *testing.T, m *vmtest.Machine, img []byte) nodes.UpdateOpts {
	imgAddr := serve(t, imagePort, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/image.raw" {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(img))
	}))
	m.GuestFwd[guestHost+":80"] = imgAddr
	return append(imageInfo("http://"+imgAddr+"/image.raw", img),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/image_http_proxy", Value: "http://" + guestHost + ":80"})
}

// imageInfo is the instance_info of a deploy of the raw whole-disk image
// img from url.
func imageInfo(url string, img []byte) nodes.UpdateOpts {
	sum := sha256.Sum256(img)
	md := md5.Sum(img)
	return nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_source", Value: url},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_checksum", Value: hex.EncodeToString(md[:])},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_os_hash_algo", Value: "sha256"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_os_hash_value", Value: hex.EncodeToString(sum[:])},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_disk_format", Value: "raw"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/root_gb", Value: "0"},
	}
}

// mbrImage is a whole-disk image of random bytes behind an MBR with one
// partition: prepare_image fails a disk without a partition table after
// the write, as IPA's _validate_partitioning does.
func mbrImage() []byte {
	img := make([]byte, 3<<20+4096)
	r := rand.NewChaCha8([32]byte{'v', 'm'})
	_, _ = r.Read(img)
	copy(img, "ironic-agent VM deploy test image")
	clear(img[440:512])
	img[446+4] = 0x83
	binary.LittleEndian.PutUint32(img[446+8:], 2048)
	binary.LittleEndian.PutUint32(img[446+12:], 4096)
	img[510], img[511] = 0x55, 0xaa
	return img
}

// TestVMDeployBIOS is scenario (d) under SeaBIOS with an MBR image.
func TestVMDeployBIOS(t *testing.T) {
	img := mbrImage()
	deployVM(t, deployCase{
		firmware: "bios", macs: [2]string{"52:54:00:6d:03:01", "52:54:00:6d:03:02"}, port: agentPortBase + 2,
		// boot_mode:bios as the VM boots: a whole-disk image then needs no
		// boot loader work from the agent.
		props: map[string]any{"capabilities": "boot_mode:bios"},
		// At the end of a BIOS deploy Ironic sets the boot device to disk,
		// which the fake management interface refuses; noop accepts it.
		management: "noop",
		image:      img, same: [][2]int{{0, len(img)}},
	})
}

// The UEFI deploy image: a GPT whose EFI system partition (fixed unique
// GUID) holds a GRUB image at a path no firmware boots by itself, so only
// the NVRAM entry the agent writes can start it; GRUB prints uefiLoaderSays
// and powers the VM off.
const (
	uefiESPGUID    = "6D5F1C2A-7E3B-4C8D-9A01-0F1E2D3C4B5A"
	uefiLoaderDir  = "ironic-vm-test"
	uefiLoaderSays = "ironic-agent VM test: the deployed boot loader ran"
)

// uefiImage builds that image (8 MiB: ESP of 4 MiB at LBA 2048, then a
// partition of random bytes) with grub-mkimage, the agent's own FAT writer
// (deploy/mkfs, which makes partition images' ESPs, so OVMF and the
// ramdisk's vfat driver read its FAT here), mtools and sgdisk, none of
// which needs root.
func uefiImage(t *testing.T) []byte {
	t.Helper()
	for _, p := range []string{"grub-mkimage", "mcopy", "mmd", "sgdisk"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (grub-common, grub-efi-amd64-bin, mtools, gdisk; in test.sh)", p)
		}
	}
	dir := t.TempDir()
	run := runner(t)
	loader := uefiLoader(t, dir, "/EFI/"+uefiLoaderDir)
	esp := filepath.Join(dir, "esp.img")
	ef, err := os.Create(esp)
	if err != nil {
		t.Fatal(err)
	}
	if err := ef.Truncate(4 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := mkfs.WriteFAT(ef, 4<<20, mkfs.FATOptions{Label: "ESP", VolumeID: 0x4553_5031, HiddenSectors: 2048}); err != nil {
		t.Fatal(err)
	}
	if err := ef.Close(); err != nil {
		t.Fatal(err)
	}
	run("mmd", "-i", esp, "::/EFI", "::/EFI/"+uefiLoaderDir)
	run("mcopy", "-i", esp, loader, "::/EFI/"+uefiLoaderDir+"/BOOTX64.EFI")

	const size = 8 << 20
	img := make([]byte, size)
	r := rand.NewChaCha8([32]byte{'u', 'e', 'f', 'i'})
	_, _ = r.Read(img)
	p := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	run("sgdisk", "-Z", p)
	run("sgdisk", "-n", "1:2048:+4M", "-t", "1:ef00", "-u", "1:"+uefiESPGUID, "-n", "2:0:0", "-t", "2:8300", p)
	espBytes, err := os.ReadFile(esp)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, p, 2048*512, espBytes)
	img, err = os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// runner returns a function that runs a host tool and fails the test with
// its output.
func runner(t *testing.T) func(name string, args ...string) {
	return func(name string, args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(t.Context(), name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
	}
}

// uefiLoader builds in dir a GRUB EFI binary that prints uefiLoaderSays
// and powers off, with prefix its configuration directory.
func uefiLoader(t *testing.T, dir, prefix string) string {
	t.Helper()
	cfg := filepath.Join(dir, "embed.cfg")
	if err := os.WriteFile(cfg, []byte("echo \""+uefiLoaderSays+"\"\nhalt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	loader := filepath.Join(dir, "loader.efi")
	runner(t)("grub-mkimage", "-O", "x86_64-efi", "-p", prefix, "-c", cfg, "-o", loader, "echo", "halt")
	return loader
}

// TestVMBootFAT32ESP boots OVMF from an EFI system partition of the size a
// partition image gets (550 MiB, so FAT32 with 4 KiB clusters) formatted
// by deploy/mkfs as WorkOnDisk formats it: with no boot entry, OVMF finds
// the removable-media loader \EFI\BOOT\BOOTX64.EFI on it and runs it.
// (TestVMDeployUEFI's ESP is a small one, FAT12.)
func TestVMBootFAT32ESP(t *testing.T) {
	needQEMU(t)
	for _, p := range []string{"grub-mkimage", "mcopy", "mmd", "sgdisk"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (grub-common, grub-efi-amd64-bin, mtools, gdisk; in test.sh)", p)
		}
	}
	dir := t.TempDir()
	run := runner(t)
	loader := uefiLoader(t, dir, "/EFI/BOOT")
	m := vmtest.DefaultMachine("uefi")
	m.Name = "ironic-agent-esp"
	m.Dir = vmDir(t)
	m.MemoryMB = 512
	m.NICs = nil
	m.Disks = []vmtest.Disk{{ID: "esp", Kind: "virtio-blk", SizeMB: 600, Serial: "LAB-ESP-0001"}}
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	disk := m.DiskPath("esp")
	const espStart, espSize = 2048 * 512, 550 << 20
	run("sgdisk", "-n", "1:2048:+550M", "-t", "1:ef00", disk)
	f, err := os.OpenFile(disk, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := mkfs.WriteFAT(io.NewOffsetWriter(f, espStart), espSize, mkfs.FATOptions{Label: "efi-part", VolumeID: 0x4553_5032, HiddenSectors: 2048})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || l.Bits != 32 {
		t.Fatalf("FAT%d: %v", l.Bits, err)
	}
	img := fmt.Sprintf("%s@@%d", disk, espStart)
	run("mmd", "-i", img, "::/EFI", "::/EFI/BOOT")
	run("mcopy", "-i", img, loader, "::/EFI/BOOT/BOOTX64.EFI")

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	vm := boot(t, ctx, m, vmtest.Options{})
	if _, err := vm.WaitFor(ctx, uefiLoaderSays); err != nil {
		t.Fatal(err)
	}
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("OVMF ran the loader from the FAT32 ESP: %.1fs to its power-off", time.Since(start).Seconds())
}

// TestVMDeployUEFI is scenario (d) under OVMF with a GPT image whose ESP
// holds a boot loader. Ironic 21.4 calls install_bootloader for a UEFI
// whole-disk deploy, and the agent writes a Boot#### entry for the loader
// through efivarfs, first in BootOrder. With vendor lenovo (ironictest's
// default) Ironic then skips set_boot_device, which the fake management
// interface would refuse. The proof of the entry: the same VM, with the
// same OVMF variable store, boots from its disks, and OVMF says it loads
// the entry "ironic1" from the ESP the image carries, whose loader runs.
func TestVMDeployUEFI(t *testing.T) {
	img := uefiImage(t)
	m := deployVM(t, deployCase{
		firmware: "uefi", macs: [2]string{"52:54:00:6d:04:01", "52:54:00:6d:04:02"}, port: agentPortBase + 3,
		image: img,
		// OVMF (Debian's edk2 2022.11) sees a virtio-scsi disk only at
		// target 0, LUN 0: at 4:2 (or 4:0, 0:2) it lists no boot option for
		// it and cannot find the ESP. A server's boot disk is at 0:0 too.
		adjust: func(m *vmtest.Machine) {
			for i := range m.Disks {
				if m.Disks[i].Serial == deployTarget {
					m.Disks[i].SCSITarget, m.Disks[i].SCSILun = 0, 0
				}
			}
		},
		// The agent moves the GPT backup header to the end of the disk
		// (IPA's fix_gpt_partition), which rewrites the protective MBR
		// entry (bytes 446-461) and the primary GPT header (LBA 1).
		same: [][2]int{{0, 446}, {462, 512}, {1024, len(img)}},
	})

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	m.Kernel, m.Initrd, m.Append = "", "", ""
	start := time.Now()
	vm := boot(t, ctx, m, vmtest.Options{})
	// OVMF says which boot option it tries first ("loading" or "failed to
	// load"); it must be the agent's entry, and its loader must run.
	first, err := vm.WaitFor(ctx, "BdsDxe: ")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`BdsDxe: loading Boot[0-9A-F]{4} "ironic1" from HD\(1,GPT,` + uefiESPGUID +
		`,0x800,0x2000\)/\\EFI\\` + uefiLoaderDir + `\\BOOTX64\.EFI$`)
	if !want.MatchString(first.Text) {
		t.Fatalf("OVMF's first boot option is not the agent's entry: %q, want a line matching %s", first.Text, want)
	}
	if _, err := vm.WaitFor(ctx, uefiLoaderSays); err != nil {
		t.Fatal(err)
	}
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("boot from the deployed disk: %.1fs to the loader's power-off (%s)", time.Since(start).Seconds(), first.Text[strings.Index(first.Text, "BdsDxe"):])
}
