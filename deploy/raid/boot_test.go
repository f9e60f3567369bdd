package raid

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/mkfs"
	"github.com/ironic-go/ironic-agent/deploy/partition"
)

func TestIsMDDevice(t *testing.T) {
	for dev, want := range map[string]bool{
		"/dev/md0": true, "/dev/md127": true, "/dev/md0p1": true, "md12p3": true,
		"/dev/sda": false, "/dev/nvme0n1p1": false, "/dev/md": false, "/dev/mdp1": false, "/dev/md-1": false, "/dev/md01": false,
	} {
		if got := IsMDDevice(dev); got != want {
			t.Errorf("IsMDDevice(%q) = %v, want %v", dev, got, want)
		}
	}
}

// The ESP mirror as IPA makes it: an ESP in each holder's free room,
// named uefi-holder-<n>, mirrored by the next free md device with
// metadata 1.0 named esp; FindESPMirror then finds it by level and FAT.
func TestCreateESPMirror(t *testing.T) {
	m := newFakeMachine(t, "vda", "vdb")
	root := []string{m.addPartition("vda", 1), m.addPartition("vdb", 1)}
	m.addArray("/dev/md0", "root", root...)
	s := m.system()
	var added []string
	s.AddPartition = func(_ context.Context, _ *blockdev.Guard, dev string, size int64, p partition.PlannedPartition, name string) (int, error) {
		if !slices.Contains(p.Flags, "boot") {
			t.Errorf("%s: partition %+v is not an EFI system partition", dev, p)
		}
		added = append(added, fmt.Sprintf("%s %dMiB %s", dev, size/blockdev.MiB, name))
		m.addPartition(filepath.Base(dev), 2)
		return 2, nil
	}
	md, err := s.CreateESPMirror(t.Context(), s.HolderDisks("/dev/md0"))
	if err != nil {
		t.Fatal(err)
	}
	if md != "/dev/md1" {
		t.Errorf("ESP mirror %s, want /dev/md1 (md0 is taken)", md)
	}
	if want := []string{"/dev/vda 550MiB uefi-holder-0", "/dev/vdb 550MiB uefi-holder-1"}; !slices.Equal(added, want) {
		t.Errorf("partitions added %q, want %q", added, want)
	}
	want := "mdadm --create /dev/md1 --force --run --metadata=1.0 --level 1 --name esp --raid-devices 2 /dev/vda2 /dev/vdb2"
	if !slices.Contains(m.calls, want) {
		t.Errorf("mdadm calls %q, want %q", m.calls, want)
	}
	for md, lvl := range map[string]string{"md0": "raid1", "md1": "raid1"} {
		m.mkdir("sys/devices/virtual/" + md + "/md")
		if err := os.WriteFile(filepath.Join(m.root, "sys/devices/virtual", md, "md/level"), []byte(lvl+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.FSType = func(dev string) (string, error) {
		if dev == "/dev/md1" {
			return "vfat", nil
		}
		return "ext4", nil
	}
	if got, err := s.FindESPMirror(); err != nil || got != "/dev/md1" {
		t.Errorf("FindESPMirror = %q, %v; want /dev/md1", got, err)
	}
}

// BIOS: a BIOS boot partition on each GPT holder, none on msdos.
func TestAddBIOSBootPartitions(t *testing.T) {
	dir := t.TempDir()
	gptDisk, msdosDisk := filepath.Join(dir, "gpt"), filepath.Join(dir, "msdos")
	for p, label := range map[string]string{gptDisk: "gpt", msdosDisk: "msdos"} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 64<<20); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.CommandContext(t.Context(), "parted", "-s", p, "mklabel", label, "mkpart", "primary", "8MiB", "40MiB").CombinedOutput(); err != nil {
			t.Skipf("SKIPPED: parted (Debian parted, in test.sh) could not write a %s label: %v: %s", label, err, out)
		}
	}
	m := newFakeMachine(t)
	s := m.system()
	var added []string
	s.AddPartition = func(_ context.Context, _ *blockdev.Guard, dev string, size int64, p partition.PlannedPartition, name string) (int, error) {
		added = append(added, fmt.Sprintf("%s %dMiB %v %s", filepath.Base(dev), size/blockdev.MiB, p.Flags, name))
		return 2, nil
	}
	if err := s.AddBIOSBootPartitions(t.Context(), []string{msdosDisk, gptDisk}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"gpt 2MiB [bios_grub] bios-boot-part-1"}; !slices.Equal(added, want) {
		t.Errorf("added %q, want %q", added, want)
	}
}

// ReadFATIdentity reads back what deploy/mkfs writes, FAT16 and FAT32.
func TestReadFATIdentity(t *testing.T) {
	for _, size := range []int64{16 << 20, 600 << 20} {
		p := filepath.Join(t.TempDir(), "fat")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		l, err := mkfs.WriteFAT(f, size, mkfs.FATOptions{Label: "EFI-SYSTEM", VolumeID: 0x1234_abcd})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 512)
		f, _ = os.Open(p)
		_, _ = f.ReadAt(b, 0)
		f.Close()
		id, ok := ReadFATIdentity(b)
		if !ok || id.VolumeID != 0x1234_abcd || id.Label != "EFI-SYSTEM" {
			t.Errorf("FAT%d: %v %v, want 1234-ABCD EFI-SYSTEM", l.Bits, id, ok)
		}
	}
	if _, ok := ReadFATIdentity(bytes.Repeat([]byte{0}, 512)); ok {
		t.Error("zeros read as FAT")
	}
}

func FuzzReadFATIdentity(f *testing.F) {
	b := make([]byte, 512)
	b[11], b[12], b[13], b[38], b[510], b[511] = 0, 2, 1, 0x29, 0x55, 0xaa
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if id, ok := ReadFATIdentity(b); ok && len(id.Label) > 11 {
			t.Errorf("label %q longer than 11 bytes", id.Label)
		}
	})
}

func TestParseExamineScan(t *testing.T) {
	out := "ARRAY /dev/md/root  metadata=1.2 UUID=3aaa0122:29827cfa:5331ad66:ca767371 name=host:root\n" +
		"ARRAY /dev/md/esp  metadata=1.0 UUID=1b0a1e4c:0e3d9a2f:8b1c2d3e:4f5a6b7c name=host:esp\n" +
		"mdadm: some warning\n"
	want := []string{"3aaa0122:29827cfa:5331ad66:ca767371", "1b0a1e4c:0e3d9a2f:8b1c2d3e:4f5a6b7c"}
	if got := ParseExamineScan([]byte(out)); !slices.Equal(got, want) {
		t.Errorf("ParseExamineScan = %q, want %q", got, want)
	}
}

func FuzzParseExamineScan(f *testing.F) {
	f.Add("ARRAY /dev/md/root metadata=1.2 UUID=3aaa0122:29827cfa:5331ad66:ca767371 name=host:root\n")
	f.Add("ARRAY\nARRAY x UUID=\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, u := range ParseExamineScan([]byte(s)) {
			if u == "" || strings.ContainsAny(u, " \n\t") {
				t.Errorf("uuid %q", u)
			}
		}
	})
}
