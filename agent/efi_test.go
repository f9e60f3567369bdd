package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/ironic-go/ironic-agent/inventory"
)

func needTool(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED: needs %s (Debian package in test.sh)", tool)
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func utf16le(s string) []byte {
	var b bytes.Buffer
	b.Write([]byte{0xff, 0xfe})
	for _, u := range utf16.Encode([]rune(s)) {
		_ = binary.Write(&b, binary.LittleEndian, u)
	}
	return b.Bytes()
}

func TestFindESP(t *testing.T) {
	needTool(t, "sgdisk")
	img := filepath.Join(t.TempDir(), "gpt.img")
	f, _ := os.Create(img)
	f.Truncate(64 << 20)
	f.Close()
	run(t, "sgdisk", "-n", "1:2048:+8M", "-t", "1:8300", "-n", "2:0:+16M", "-t", "2:ef00", "-u", "2:1B4E28BA-2FA1-11D2-883F-B9A761BDE3FB", img)
	esp, err := findESP(img, "")
	if err != nil || esp == nil || esp.number != 2 || esp.path != img+"2" {
		t.Fatalf("GPT ESP %+v %v", esp, err)
	}
	// No ESP type, found by unique GUID instead.
	run(t, "sgdisk", "-t", "2:8300", img)
	esp, err = findESP(img, "1b4e28ba-2fa1-11d2-883f-b9a761bde3fb")
	if err != nil || esp == nil || esp.number != 2 {
		t.Fatalf("by UUID %+v %v", esp, err)
	}
	if esp, err := findESP(img, ""); err != nil || esp != nil {
		t.Errorf("no ESP: %+v %v", esp, err)
	}

	// MBR with a type 0xEF partition in slot 3.
	mbr := make([]byte, 1<<20)
	mbr[446+16*2+4] = 0xef
	mbr[510], mbr[511] = 0x55, 0xaa
	m := filepath.Join(t.TempDir(), "mbr.img")
	os.WriteFile(m, mbr, 0o644)
	if esp, err := findESP(m, ""); err != nil || esp == nil || esp.number != 3 {
		t.Errorf("MBR ESP %+v %v", esp, err)
	}
}

func TestPartitionPath(t *testing.T) {
	for dev, want := range map[string]string{"/dev/sda": "/dev/sda2", "/dev/nvme0n1": "/dev/nvme0n1p2", "/dev/loop3": "/dev/loop3p2"} {
		if got := partitionPath(dev, 2); got != want {
			t.Errorf("%s: %s, want %s", dev, got, want)
		}
	}
}

func TestEFIEntries(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "EFI/debian"), 0o755)
	os.MkdirAll(filepath.Join(root, "EFI/BOOT"), 0o755)
	os.WriteFile(filepath.Join(root, "EFI/BOOT/BOOTX64.EFI"), []byte("MZ"), 0o755)
	os.WriteFile(filepath.Join(root, "EFI/BOOT/notes.txt"), []byte("x"), 0o755)
	loaders, err := findEFILoaders(root)
	if err != nil || strings.Join(loaders, ",") != "EFI/BOOT/BOOTX64.EFI" {
		t.Fatalf("loaders %v %v", loaders, err)
	}
	e, _ := efiEntries(root, loaders)
	if len(e) != 1 || e[0].loader != `\EFI\BOOT\BOOTX64.EFI` || e[0].label != "ironic1" {
		t.Errorf("entries %+v", e)
	}
	// A CSV (UTF-16, as shim ships it) wins alone.
	os.WriteFile(filepath.Join(root, "EFI/debian/BOOTX64.CSV"), utf16le("shimx64.efi,debian,,This is the boot entry for debian\n"), 0o644)
	loaders, _ = findEFILoaders(root)
	e, err = efiEntries(root, loaders)
	if err != nil || len(e) != 1 || e[0].loader != `\EFI\debian\shimx64.efi` || e[0].label != "debian" {
		t.Errorf("CSV entries %+v %v", e, err)
	}
}

// fakeEfibootmgr puts a stand-in efibootmgr first in PATH that records its
// arguments and lists two entries for -v (as UTF-16 when utf16 is set, as
// old efibootmgr versions print).
func fakeEfibootmgr(t *testing.T, utf16 bool) string {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	listing := "BootCurrent: 0001\nBootOrder: 0001,0002\nBoot0001* debian\tHD(1,GPT,...)/File(\\EFI\\debian\\shimx64.efi)\nBoot0002* UEFI PXEv4\n"
	out := []byte(listing)
	if utf16 {
		out = utf16le(listing)
	}
	os.WriteFile(filepath.Join(dir, "listing"), out, 0o644)
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\nif [ \"$*\" = \"-v\" ]; then cat " + filepath.Join(dir, "listing") + "; fi\n"
	os.WriteFile(filepath.Join(dir, "efibootmgr"), []byte(script), 0o755)
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return calls
}

func TestRegisterEFI(t *testing.T) {
	for _, u16 := range []bool{false, true} {
		calls := fakeEfibootmgr(t, u16)
		entries := []efiEntry{{loader: `\EFI\debian\shimx64.efi`, label: "debian"}, {loader: `\EFI\BOOT\BOOTX64.EFI`, label: "ironic2"}}
		if err := registerEFI(context.Background(), "/dev/sdz", 1, entries); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(calls)
		want := "-v\n-b 0001 -B\n-v -c -d /dev/sdz -p 1 -w -L debian -l \\EFI\\debian\\shimx64.efi\n-v -c -d /dev/sdz -p 1 -w -L ironic2 -l \\EFI\\BOOT\\BOOTX64.EFI\n"
		if string(got) != want {
			t.Errorf("utf16=%v efibootmgr calls\n%s\nwant\n%s", u16, got, want)
		}
	}
	// A failing efibootmgr is reported with its command line and stderr.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "efibootmgr"), []byte("#!/bin/sh\necho 'EFI variables are not supported on this system.' >&2\nexit 2\n"), 0o755)
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	err := registerEFI(context.Background(), "/dev/sdz", 1, []efiEntry{{loader: `\x`, label: "l"}})
	if err == nil || !strings.Contains(err.Error(), "efibootmgr -v: exit status 2; stderr: EFI variables are not supported on this system.") {
		t.Errorf("error %v", err)
	}
}

// TestInstallBootloaderUEFI runs the UEFI path on a real loop device with a
// real VFAT ESP; only efibootmgr is a stand-in (this machine's NVRAM is not
// ours to change), recording its arguments.
func TestInstallBootloaderUEFI(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: loop devices and mounting a VFAT ESP")
	}
	needTool(t, "sgdisk", "mkfs.vfat", "losetup", "partx")
	if fss, _ := os.ReadFile("/proc/filesystems"); !bytes.Contains(fss, []byte("\tvfat\n")) {
		t.Skip("SKIPPED: this kernel cannot mount vfat (no vfat in /proc/filesystems); TestRegisterEFI covers the efibootmgr part")
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	f, _ := os.Create(img)
	f.Truncate(64 << 20)
	f.Close()
	loop := strings.TrimSpace(run(t, "losetup", "--find", "--show", "--partscan", img))
	t.Cleanup(func() {
		// The kernel may hold the device a moment after a re-read.
		for i := 0; i < 20; i++ {
			if exec.Command("losetup", "-d", loop).Run() == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("could not detach %s", loop)
	})
	// Partition the attached device, then have the kernel add the
	// partitions (sgdisk's re-read request is not always honoured here).
	run(t, "sgdisk", "-n", "1:2048:+32M", "-t", "1:ef00", "-n", "2:0:0", "-t", "2:8300", loop)
	run(t, "partx", "-u", loop)
	part := loop + "p1"
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(part); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", part)
		}
		time.Sleep(50 * time.Millisecond)
	}
	run(t, "mkfs.vfat", part)
	mnt := filepath.Join(dir, "mnt")
	os.MkdirAll(mnt, 0o755)
	run(t, "mount", part, mnt)
	os.MkdirAll(filepath.Join(mnt, "EFI/debian"), 0o755)
	os.WriteFile(filepath.Join(mnt, "EFI/debian/shimx64.efi"), []byte("MZ"), 0o755)
	os.WriteFile(filepath.Join(mnt, "EFI/debian/BOOTX64.CSV"), utf16le("shimx64.efi,debian,,This is the boot entry for debian\n"), 0o644)
	run(t, "umount", mnt)

	calls := fakeEfibootmgr(t, false)

	inv := func(ctx context.Context) (*inventory.Inventory, error) {
		i, err := testInventory(ctx)
		i.Boot.CurrentBootMode = "uefi"
		return i, err
	}
	ra := standalone(t, Options{Inventory: inv}, map[string]string{"allowed_devices": loop})
	_, r := call(t, ra, "poll.set_node_info", map[string]any{"node_info": map[string]any{
		"node": map[string]any{"uuid": "u-1", "properties": map[string]any{"root_device": map[string]any{"name": loop}}}}})
	if r["command_status"] != "SUCCEEDED" {
		t.Fatalf("set_node_info %v", r)
	}
	_, r = call(t, ra, "image.install_bootloader", map[string]any{"root_uuid": nil, "efi_system_part_uuid": nil, "prep_boot_part_uuid": nil, "target_boot_mode": "uefi"})
	if r["command_status"] != "SUCCEEDED" {
		t.Fatalf("install_bootloader %v", r)
	}
	got, _ := os.ReadFile(calls)
	want := "-v\n-b 0001 -B\n-v -c -d " + loop + " -p 1 -w -L debian -l \\EFI\\debian\\shimx64.efi\n"
	if string(got) != want {
		t.Errorf("efibootmgr calls\n%s\nwant\n%s", got, want)
	}
}
