package bootloader

import (
	"context"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/efivar"
	"github.com/ironic-go/ironic-agent/internal/efivar/efivartest"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

// TestMain runs the tests in a private mount namespace: their mounts and
// loop devices go with the test binary, even when it is killed.
func TestMain(m *testing.M) { looptest.Main(m.Run) }

func TestFindESP(t *testing.T) {
	looptest.RequireTools(t, "sgdisk")
	img := filepath.Join(t.TempDir(), "gpt.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	looptest.Run(t, "sgdisk", "-n", "1:2048:+8M", "-t", "1:8300", "-n", "2:0:+16M", "-t", "2:ef00", "-u", "2:1B4E28BA-2FA1-11D2-883F-B9A761BDE3FB", img)
	esp, err := findESP(img, "")
	if err != nil || esp == nil || esp.number != 2 || esp.path != img+"2" {
		t.Fatalf("GPT ESP %+v %v", esp, err)
	}
	// The hard drive node of a boot entry: sgdisk put partition 2 at
	// 2048+8M = LBA 18432, 16 MiB long.
	if got := esp.hd.Node().String(); got != "HD(2,GPT,1b4e28ba-2fa1-11d2-883f-b9a761bde3fb,0x4800,0x8000)" {
		t.Errorf("ESP node %s", got)
	}
	// No ESP type, found by unique GUID instead.
	looptest.Run(t, "sgdisk", "-t", "2:8300", img)
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
	binary.LittleEndian.PutUint32(mbr[440:], 0xcafe0001)
	binary.LittleEndian.PutUint32(mbr[446+16*2+8:], 4096)
	binary.LittleEndian.PutUint32(mbr[446+16*2+12:], 2048)
	m := filepath.Join(t.TempDir(), "mbr.img")
	os.WriteFile(m, mbr, 0o644)
	if esp, err := findESP(m, ""); err != nil || esp == nil || esp.number != 3 {
		t.Errorf("MBR ESP %+v %v", esp, err)
	} else if got := esp.hd.Node().String(); got != "HD(3,MBR,0xcafe0001,0x1000,0x800)" {
		t.Errorf("MBR ESP node %s", got)
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
	os.WriteFile(filepath.Join(root, "EFI/debian/BOOTX64.CSV"), efivartest.UTF16LE("shimx64.efi,debian,,This is the boot entry for debian\n"), 0o644)
	loaders, _ = findEFILoaders(root)
	e, err = efiEntries(root, loaders)
	if err != nil || len(e) != 1 || e[0].loader != `\EFI\debian\shimx64.efi` || e[0].label != "debian" {
		t.Errorf("CSV entries %+v %v", e, err)
	}

	// An arm64 image's ESP: removable BOOTAA64.EFI, and shim's
	// BOOTAA64.CSV naming shimaa64.efi, which wins over grubaa64.efi.
	arm := t.TempDir()
	os.MkdirAll(filepath.Join(arm, "EFI/debian"), 0o755)
	os.MkdirAll(filepath.Join(arm, "EFI/BOOT"), 0o755)
	os.WriteFile(filepath.Join(arm, "EFI/BOOT/BOOTAA64.EFI"), []byte("MZ"), 0o755)
	os.WriteFile(filepath.Join(arm, "EFI/debian/grubaa64.efi"), []byte("MZ"), 0o755)
	loaders, err = findEFILoaders(arm)
	if err != nil || strings.Join(loaders, ",") != "EFI/BOOT/BOOTAA64.EFI,EFI/debian/grubaa64.efi" {
		t.Fatalf("arm64 loaders %v %v", loaders, err)
	}
	os.WriteFile(filepath.Join(arm, "EFI/debian/shimaa64.efi"), []byte("MZ"), 0o755)
	os.WriteFile(filepath.Join(arm, "EFI/debian/BOOTAA64.CSV"), efivartest.UTF16LE("shimaa64.efi,debian,,This is the boot entry for debian\n"), 0o644)
	loaders, _ = findEFILoaders(arm)
	e, err = efiEntries(arm, loaders)
	if err != nil || len(e) != 1 || e[0].loader != `\EFI\debian\shimaa64.efi` || e[0].label != "debian" {
		t.Errorf("arm64 CSV entries %+v %v", e, err)
	}
}

func TestRegisterEFI(t *testing.T) {
	s := efivartest.FakeNVRAM(t)
	esp := &espPartition{number: 1, path: "/dev/sdz1", hd: efivar.HardDrive{PartitionNumber: 1, Start: 2048, Size: 4096,
		Signature: [16]byte{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b},
		MBRType:   efivar.PartitionGPT, SignatureType: efivar.SignatureGUID}}
	entries := []efiEntry{{loader: `\EFI\debian\shimx64.efi`, label: "debian"}, {loader: `\EFI\BOOT\BOOTX64.EFI`, label: "ironic2"}}
	if err := registerEFI(context.Background(), slog.New(slog.DiscardHandler), s, esp, entries); err != nil {
		t.Fatal(err)
	}
	// "debian" replaced at the lowest free number, as efibootmgr -c picks
	// after -B; "ironic2" new; both ahead of PXE, the last one written
	// first.
	hd := "HD(1,GPT,c12a7328-f81f-11d2-ba4b-00a0c93ec93b,0x800,0x1000)"
	want := "BootOrder [0001 0000 0002]\n" +
		"Boot0000 debian " + hd + `/File(\EFI\debian\shimx64.efi)` + "\n" +
		"Boot0001 ironic2 " + hd + `/File(\EFI\BOOT\BOOTX64.EFI)` + "\n" +
		"Boot0002 UEFI PXEv4 Path(3,11,000000000000000000000000000000000000000000000000000000000000000000)\n"
	if got := efivartest.NVRAM(t, s); got != want {
		t.Errorf("NVRAM\n%s\nwant\n%s", got, want)
	}
	// Running it again changes nothing: same entries, same numbers.
	if err := registerEFI(context.Background(), slog.New(slog.DiscardHandler), s, esp, entries); err != nil {
		t.Fatal(err)
	}
	if got := efivartest.NVRAM(t, s); got != want {
		t.Errorf("second run: NVRAM\n%s", got)
	}
	// A directory that is not there is an error naming it.
	err := registerEFI(context.Background(), slog.New(slog.DiscardHandler), efivar.Store{Dir: "/nonexistent/efivars"}, esp, entries[:1])
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/efivars") {
		t.Errorf("error %v", err)
	}
}

// TestFirmwareCannotSee: the agent writes no entries into the real NVRAM
// for a device firmware cannot boot from (only stat is called here).
func TestFirmwareCannotSee(t *testing.T) {
	f := filepath.Join(t.TempDir(), "disk.img")
	os.WriteFile(f, nil, 0o644)
	if why := firmwareCannotSee(f); why != "not a block device" {
		t.Errorf("regular file: %q", why)
	}
	if why := firmwareCannotSee("/nonexistent"); why == "" {
		t.Error("missing device: no reason")
	}
	if st, err := os.Stat("/dev/loop0"); err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0 {
		if why := firmwareCannotSee("/dev/loop0"); why != "a loop device" {
			t.Errorf("/dev/loop0: %q", why)
		}
	}
	for _, d := range []string{"/dev/vda", "/dev/sda", "/dev/nvme0n1"} {
		if st, err := os.Stat(d); err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0 {
			if why := firmwareCannotSee(d); why != "" {
				t.Errorf("%s: %q", d, why)
			}
		}
	}
}

// FuzzFindESP feeds findESP partition tables it reads from a disk the
// image wrote: any bytes give an ESP, none, or an error, never a panic,
// and a found ESP's hard drive node is one firmware could use.
func FuzzFindESP(f *testing.F) {
	// A GPT with the ESP as entry 2 (512-byte sectors), and an MBR with a
	// type 0xEF partition.
	gpt := make([]byte, 34*512)
	gpt[510], gpt[511] = 0x55, 0xaa
	gpt[446+4] = 0xee // protective MBR entry
	binary.LittleEndian.PutUint32(gpt[446+8:], 1)
	binary.LittleEndian.PutUint32(gpt[446+12:], 33)
	hdr := gpt[512:]
	copy(hdr, "EFI PART")
	binary.LittleEndian.PutUint64(hdr[72:], 2)   // entries at LBA 2
	binary.LittleEndian.PutUint32(hdr[80:], 4)   // 4 entries
	binary.LittleEndian.PutUint32(hdr[84:], 128) // of 128 bytes
	e := gpt[1024+128:]
	// The ESP type C12A7328-F81F-11D2-BA4B-00A0C93EC93B as stored on disk.
	copy(e, []byte{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b})
	copy(e[16:], "unique-guid-here")
	binary.LittleEndian.PutUint64(e[32:], 2048)
	binary.LittleEndian.PutUint64(e[40:], 4095)
	f.Add(gpt)
	mbr := make([]byte, 1024)
	mbr[446+4], mbr[510], mbr[511] = 0xef, 0x55, 0xaa
	binary.LittleEndian.PutUint32(mbr[446+8:], 2048)
	f.Add(mbr)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "disk.img")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		esp, err := findESP(p, "756e6971-6575-672d-7569-642d68657265")
		if err != nil || esp == nil {
			return
		}
		if esp.number < 1 || esp.hd.PartitionNumber != uint32(esp.number) {
			t.Fatalf("ESP %+v", esp)
		}
		b, err = efivar.LoadOption{Description: "x", FilePath: efivar.DevicePath{esp.hd.Node()}}.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		o, err := efivar.ParseLoadOption(b)
		if err != nil {
			t.Fatalf("ESP node does not decode: %v", err)
		}
		if hd, ok := o.FilePath[0].HardDrive(); !ok || hd != esp.hd {
			t.Fatalf("ESP node decodes to %+v, want %+v", hd, esp.hd)
		}
	})
}

// TestRAIDBootEntries: the loader grub-install put on the ESP mirror gets
// one NVRAM entry per holder's ESP, each naming its own partition, the
// labels told apart by the holder's place in the mirror.
func TestRAIDBootEntries(t *testing.T) {
	s := efivartest.FakeNVRAM(t)
	mnt := t.TempDir()
	if err := os.MkdirAll(filepath.Join(mnt, "EFI/BOOT"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "EFI/BOOT/BOOTX64.EFI"), []byte("MZ"), 0o755); err != nil {
		t.Fatal(err)
	}
	holder := func(disk string, last byte) holderESP {
		sig := [16]byte{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, last}
		return holderESP{disk: disk, esp: &espPartition{number: 2, path: disk + "2", hd: efivar.HardDrive{PartitionNumber: 2, Start: 2048, Size: 1126400,
			Signature: sig, MBRType: efivar.PartitionGPT, SignatureType: efivar.SignatureGUID}}}
	}
	holders := []holderESP{holder("/dev/vda", 0x01), holder("/dev/vdb", 0x02)}
	if err := raidBootEntries(context.Background(), slog.New(slog.DiscardHandler), s, mnt, holders); err != nil {
		t.Fatal(err)
	}
	hd := func(last string) string {
		return "HD(2,GPT,c12a7328-f81f-11d2-ba4b-00a0c93ec9" + last + ",0x800,0x113000)" + `/File(\EFI\BOOT\BOOTX64.EFI)`
	}
	// The fake NVRAM's own entries (debian, PXE) stay; the second
	// holder's entry, written last, comes first.
	want := "BootOrder [0003 0000 0001 0002]\n" +
		"Boot0000 ironic1 (RAID, part0) " + hd("01") + "\n" +
		"Boot0001 debian File(\\EFI\\debian\\shimx64.efi)\n" +
		"Boot0002 UEFI PXEv4 Path(3,11,000000000000000000000000000000000000000000000000000000000000000000)\n" +
		"Boot0003 ironic1 (RAID, part1) " + hd("02") + "\n"
	if got := efivartest.NVRAM(t, s); got != want {
		t.Errorf("NVRAM\n%s\nwant\n%s", got, want)
	}
	// An empty mirror (grub-install failed to put anything there) writes
	// nothing and is no error: the caller has reported grub-install.
	s2 := efivartest.FakeNVRAM(t)
	before := efivartest.NVRAM(t, s2)
	if err := raidBootEntries(context.Background(), slog.New(slog.DiscardHandler), s2, t.TempDir(), holders); err != nil {
		t.Fatal(err)
	}
	if got := efivartest.NVRAM(t, s2); got != before {
		t.Errorf("empty mirror: NVRAM changed:\n%s", got)
	}
}
