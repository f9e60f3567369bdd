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

// TestGuestPrintsTheMarkers: the guest (package main, which cannot be
// imported) spells each console line as this package matches it.
func TestGuestPrintsTheMarkers(t *testing.T) {
	src, err := os.ReadFile("../guest/osimage/main.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{Booted, DriveLine, HostnameLine, UserDataLine, FailedLine, PoweringOff, SecureBootLine} {
		if !strings.Contains(string(src), strconv.Quote(m)) {
			t.Errorf("internal/testbed/guest/osimage/main.go does not print %q", m)
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

// TestSecureBootPartitionImage: the partition image for Secure Boot holds,
// in its ext4 root, Debian's signed shim and GRUB in /boot/efi/EFI/debian
// with shim's BOOTX64.CSV and the grub.cfg handing over to
// /boot/grub/grub.cfg, GRUB's environment block, the image's GRUB tools
// and the kernel grub-mkconfig lists. The signed packages' image holds
// shim and GRUB where the packages put them and no /boot/efi/EFI.
func TestSecureBootPartitionImage(t *testing.T) {
	if os.Getenv("E2E_VM_SLOW") != "1" {
		// The image of a slow scenario (TestVMRedfishSecureBootPartition),
		// about a minute to build under the default run's load.
		t.Skip("SKIPPED: slow scenario's image; E2E_VM_SLOW=1 runs it (docs/testing.md: Environment switches)")
	}
	if m := grubimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (test.sh APT_PACKAGES)", m)
	}
	if _, err := exec.LookPath("debugfs"); err != nil {
		t.Skip("SKIPPED: needs debugfs (e2fsprogs, test.sh APT_PACKAGES)")
	}
	o, dir := buildOS(t)
	img := filepath.Join(dir, "root.img")
	if err := o.SecureBootPartitionImage(t.Context(), dir, img, 96<<20); err != nil {
		t.Fatal(err)
	}
	cat := func(f string) string {
		out, err := exec.CommandContext(t.Context(), "debugfs", "-R", "cat "+f, img).Output()
		if err != nil {
			t.Fatalf("debugfs cat %s: %v", f, err)
		}
		return string(out)
	}
	efi := "/boot/efi/" + SignedDir + "/"
	for _, f := range []string{efi + "shimx64.efi", efi + "grubx64.efi", efi + "BOOTX64.CSV", "/usr/sbin/grub-mkconfig", "/boot/vmlinuz-" + grubimage.KernelVersion} {
		if len(cat(f)) == 0 {
			t.Errorf("the root file system has no %s", f)
		}
	}
	if got := cat(efi + "grub.cfg"); !strings.Contains(got, "configfile $prefix/grub.cfg") || !strings.Contains(got, "prefix=($root)/boot/grub") {
		t.Errorf("%sgrub.cfg does not hand over to /boot/grub/grub.cfg:\n%s", efi, got)
	}
	if env := cat("/boot/grub/grubenv"); len(env) != 1024 || !strings.HasPrefix(env, "# GRUB Environment Block\n") {
		t.Errorf("/boot/grub/grubenv: %d bytes, %.30q; want GRUB's 1024-byte block", len(env), env)
	}
	if csv := cat(efi + "BOOTX64.CSV"); !strings.Contains(csv, "s\x00h\x00i\x00m\x00") {
		t.Errorf("BOOTX64.CSV does not name shim: %q", csv)
	}

	// SignedPackagesPartitionImage: the packages' files, no EFI assets.
	sub := filepath.Join(dir, "signed-packages")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	img = filepath.Join(sub, "root.img")
	if err := o.SignedPackagesPartitionImage(t.Context(), sub, img, 96<<20); err != nil {
		t.Fatal(err)
	}
	bc, err := qemu.FetchBootChain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for f, src := range map[string]string{ShimSignedPath: bc.Shim, GrubSignedPath: bc.Grub} {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if got := cat(f); got != string(want) {
			t.Errorf("%s: %d bytes, want the %d of %s", f, len(got), len(want), src)
		}
	}
	out, err := exec.CommandContext(t.Context(), "debugfs", "-R", "ls /boot/efi/EFI", img).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "File not found") {
		t.Errorf("the signed packages' image has /boot/efi/EFI (%v): %s", err, out)
	}
}

// TestArm64UEFIDisk boots the arm64 whole-disk image on QEMU's arm64
// virt machine under AAVMF with no NVRAM entry for it: the firmware
// starts GRUB for arm64 from the ESP's removable path
// (\EFI\BOOT\BOOTAA64.EFI; its boot line names the disk, no file), GRUB loads Debian's
// gzip'ed arm64 kernel and the guest, cross-built, runs as /init (and
// says it found no config drive). Slow (E2E_VM_SLOW): an arm64 boot
// under TCG.
func TestArm64UEFIDisk(t *testing.T) {
	if os.Getenv("E2E_VM_SLOW") != "1" {
		t.Skip("SKIPPED: slow scenario (an arm64 VM under TCG); E2E_VM_SLOW=1 runs it (docs/testing.md: Environment switches)")
	}
	if m := Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (test.sh APT_PACKAGES)", m)
	}
	for _, p := range []string{"/usr/bin/qemu-system-aarch64", qemu.AAVMFCode} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("SKIPPED: needs qemu-system-arm and qemu-efi-aarch64 (test.sh APT_PACKAGES): %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	dir := t.TempDir()
	o, err := BuildArch(ctx, dir, qemu.Arm64)
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "arm64.raw")
	if err := o.UEFIDisk(ctx, dir, img); err != nil {
		t.Fatal(err)
	}
	m := qemu.Arm64Machine()
	m.Name = "ironic-agent-osimage-arm64"
	m.Dir = filepath.Join(dir, "vm")
	m.NICs = nil
	m.Disks = []qemu.Disk{{ID: "os", Kind: qemu.DiskVirtioBlk, SizeMB: 64, Serial: "OS-ARM64", BootFirst: true}}
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	if err := qemu.CopyFile(img, m.DiskPath("os")); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(m.DiskPath("os"), 64<<20); err != nil {
		t.Fatal(err)
	}
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	for _, s := range []string{LoaderLine, Booted, PoweringOff} {
		l, err := vm.WaitFor(ctx, s)
		if err != nil {
			t.Fatalf("%v\n%s", err, vm.Tail())
		}
		t.Logf("%.1fs: %s", l.At.Seconds(), strings.TrimSpace(l.Text))
	}
	// The entry AAVMF made for the disk (the NVRAM is its template's)
	// names the device only: the firmware found the loader at the
	// removable path, as it does for a disk whose entry is gone.
	if l, ok := vm.Find("BdsDxe: starting Boot"); !ok {
		t.Error("AAVMF printed no boot line")
	} else if strings.Contains(l.Text, `\`) || strings.Contains(l.Text, "PXE") || strings.Contains(l.Text, "FvFile") {
		t.Errorf("AAVMF booted an entry naming a file or the network, not the disk's removable path: %q", strings.TrimSpace(l.Text))
	} else {
		t.Logf("removable path: %s", strings.TrimSpace(l.Text))
	}
}
