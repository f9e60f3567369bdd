package raid

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/mkfs"
	"github.com/ironic-go/ironic-agent/deploy/partition"
)

// This file is the boot half of deploying onto software RAID, IPA's
// raid_utils.prepare_boot_partitions_for_softraid: the firmware reads
// disks, not arrays, so each holder disk of the install array gets its own
// boot partition in the room MakePlan kept before the RAID partitions. On
// UEFI the holders' ESPs are mirrored by an md RAID-1 with metadata 1.0
// (ESPMetadata), the superblock at the end, so each member starts with
// the FAT the firmware reads; on BIOS with GPT each holder gets a BIOS
// boot partition for GRUB's core image.

// IsMDDevice reports whether dev is an md array or a partition of one
// (/dev/md0, /dev/md0p1): IPA's is_md_device.
func IsMDDevice(dev string) bool {
	name := filepath.Base(dev)
	if i := strings.LastIndex(name, "p"); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i]
		}
	}
	n, ok := mdNumber(name)
	return ok && n >= 0
}

// FindESPMirror is IPA's find_esp_raid: the first RAID-1 array that
// carries a FAT filesystem, "" when there is none.
func (s *System) FindESPMirror() (string, error) {
	arrays, err := s.Arrays()
	if err != nil {
		return "", err
	}
	for _, md := range arrays {
		lvl, err := os.ReadFile(filepath.Join(s.sysBlock(filepath.Base(md)), "md/level"))
		if err != nil || strings.TrimSpace(string(lvl)) != "raid1" {
			continue
		}
		if fs, err := s.fsType(md); err == nil && fs == "vfat" {
			return md, nil
		}
	}
	return "", nil
}

func (s *System) fsType(dev string) (string, error) {
	if s.FSType != nil {
		return s.FSType(dev)
	}
	return blockdev.FSType(dev)
}

func (s *System) addPartition(ctx context.Context, dev string, size int64, p partition.PlannedPartition, name string) (int, error) {
	if s.AddPartition != nil {
		return s.AddPartition(ctx, s.Guard, dev, size, p, name)
	}
	return partition.AddPartition(ctx, s.Guard, dev, size, p, name)
}

// nextFreeMD is IPA's get_next_free_raid_device: the lowest /dev/mdN no
// array uses.
func (s *System) nextFreeMD() (string, error) {
	taken, err := s.MDDevices()
	if err != nil {
		return "", err
	}
	for i := 0; i < 128; i++ {
		name := "/dev/md" + strconv.Itoa(i)
		if !slices.Contains(taken, name) {
			return name, nil
		}
	}
	return "", softwareRAIDError(nil, "No free md (RAID) devices are left")
}

// CreateESPMirror makes an ESP of ESPMiB on each holder (type EF00,
// named uefi-holder-<n>, in the first free space on a 1 MiB boundary:
// the room MakePlan kept) and mirrors them in a RAID-1 named "esp" with
// metadata 1.0, the next free md device, which it returns unformatted.
func (s *System) CreateESPMirror(ctx context.Context, holders []string) (string, error) {
	var parts []string
	for n, h := range holders {
		p, label, _ := BootPartition("uefi", "gpt", n, 0)
		num, err := s.addPartition(ctx, h, p.Size, p, label)
		if err != nil {
			return "", softwareRAIDError(err, "creating the EFI partition on holder disk %s: %v", h, err)
		}
		part := blockdev.PartitionPath(h, num)
		if err := s.waitDevice(ctx, part); err != nil {
			return "", softwareRAIDError(err, "EFI partition %s: %v", part, err)
		}
		s.log().Info("EFI partition created on holder disk", "partition", part, "holder", h)
		parts = append(parts, part)
	}
	md, err := s.nextFreeMD()
	if err != nil {
		return "", err
	}
	args := []string{"--create", md, "--force", "--run", "--metadata=" + ESPMetadata, "--level", "1",
		"--name", "esp", "--raid-devices", strconv.Itoa(len(parts))}
	s.log().Info("creating the md device mirroring the ESPs", "device", md, "partitions", parts)
	if _, err := s.mdadm(ctx, append(args, parts...)...); err != nil {
		return "", softwareRAIDError(err, "Failed to create md device %s on %s: %v", md, strings.Join(parts, " "), err)
	}
	return md, nil
}

// FATIdentity is what a relocated ESP keeps of the one it replaces, so
// that the image's fstab (UUID= or LABEL=) still finds it.
type FATIdentity struct {
	VolumeID uint32
	Label    string
}

// ReadFATIdentity reads the volume ID and label from a FAT boot sector
// (the BPB's extended fields: at 39 and 43 on FAT12/16, at 67 and 71 on
// FAT32). ok is false when b is not a FAT boot sector with them.
func ReadFATIdentity(b []byte) (id FATIdentity, ok bool) {
	if len(b) < 512 || b[510] != 0x55 || b[511] != 0xaa {
		return id, false
	}
	bps := binary.LittleEndian.Uint16(b[11:])
	if bps < 512 || bps > 4096 || bps&(bps-1) != 0 || b[13] == 0 {
		return id, false
	}
	off := 36 // extended BPB of FAT12/16
	if binary.LittleEndian.Uint16(b[17:]) == 0 && binary.LittleEndian.Uint16(b[22:]) == 0 {
		off = 64 // FAT32: no root entries, FAT size in the 32-bit field
	}
	if b[off+2] != 0x29 { // extended boot signature: the fields exist
		return id, false
	}
	id.VolumeID = binary.LittleEndian.Uint32(b[off+3:])
	id.Label = strings.TrimRight(string(b[off+7:off+18]), " \x00")
	if id.Label == "NO NAME" {
		id.Label = ""
	}
	return id, true
}

// FormatESP writes a FAT filesystem on the ESP mirror md, as IPA's
// utils.mkfs(vfat) does: with the identity of the ESP it replaces, or
// labelled efi-part with a random volume ID when there is none.
func (s *System) FormatESP(md string, id *FATIdentity) error {
	opts := mkfs.FATOptions{Label: "efi-part"}
	if id != nil {
		opts.Label, opts.VolumeID = id.Label, id.VolumeID
		if opts.Label == "" {
			opts.Label = "esp"
		}
	}
	if opts.VolumeID == 0 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		opts.VolumeID = binary.LittleEndian.Uint32(b[:])
	}
	// The agent's guard: it lets an array through when every member is
	// allowed (the holders' ESPs are partitions of allowed disks).
	d, err := blockdev.Open(s.Guard, md)
	if err != nil {
		return softwareRAIDError(err, "formatting the ESP mirror %s: %v", md, err)
	}
	defer d.Close()
	opts.SectorSize = d.SectorSize
	f, err := os.OpenFile(md, os.O_RDWR, 0)
	if err != nil {
		return softwareRAIDError(err, "formatting the ESP mirror %s: %v", md, err)
	}
	defer f.Close()
	if _, err := mkfs.WriteFAT(f, d.Size, opts); err != nil {
		return softwareRAIDError(err, "formatting the ESP mirror %s: %v", md, err)
	}
	if err := f.Sync(); err != nil {
		return softwareRAIDError(err, "sync %s: %v", md, err)
	}
	return nil
}

// AddBIOSBootPartitions gives each GPT holder a BIOS boot partition of
// 2 MiB (type EF02, named bios-boot-part-<n>) where MakePlan kept room,
// for GRUB's core image; msdos holders need none (the gap after the MBR
// holds it).
func (s *System) AddBIOSBootPartitions(ctx context.Context, holders []string) error {
	for n, h := range holders {
		t, err := blockdev.ReadPartTable(h, s.sectorSize(h))
		if err != nil {
			return softwareRAIDError(err, "reading the partition table of holder disk %s: %v", h, err)
		}
		if t.Kind != "gpt" {
			continue
		}
		p, label, _ := BootPartition("bios", "gpt", n, 0)
		num, err := s.addPartition(ctx, h, p.Size, p, label)
		if err != nil {
			return softwareRAIDError(err, "creating the BIOS boot partition on holder disk %s: %v", h, err)
		}
		s.log().Info("BIOS boot partition created on holder disk", "partition", blockdev.PartitionPath(h, num), "holder", h)
	}
	return nil
}

// String is the identity as mkfs.fat's -i and -n take it.
func (id FATIdentity) String() string {
	return fmt.Sprintf("%04X-%04X %q", id.VolumeID>>16, id.VolumeID&0xffff, id.Label)
}

// sectorSize is a disk's logical sector size from sysfs (512 when it
// cannot be read).
func (s *System) sectorSize(dev string) int {
	v, err := blockdev.ReadSysInt(filepath.Join(blockdev.QueueDir(blockdev.ResolveLink(s.sysBlock(filepath.Base(dev)))), "logical_block_size"))
	if err != nil || v <= 0 {
		return 512
	}
	return int(v)
}

// ArrayUUIDs are the UUIDs of the md arrays whose superblocks mdadm finds
// (`mdadm --examine --scan`, IPA's md_get_raid_devices), in its order.
func (s *System) ArrayUUIDs(ctx context.Context) ([]string, error) {
	out, err := s.mdadm(ctx, "--examine", "--scan")
	if err != nil {
		return nil, softwareRAIDError(err, "listing the md arrays: %v", err)
	}
	return ParseExamineScan(out), nil
}

// ParseExamineScan reads the UUID= of each "ARRAY <device> key=value..."
// line of `mdadm --examine --scan`.
func ParseExamineScan(out []byte) []string {
	var uuids []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "ARRAY" {
			continue
		}
		for _, kv := range f[2:] {
			if u, ok := strings.CutPrefix(kv, "UUID="); ok && u != "" {
				uuids = append(uuids, u)
			}
		}
	}
	return uuids
}
