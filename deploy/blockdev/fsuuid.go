package blockdev

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Filesystem and partition UUIDs read in Go, as `lsblk -o UUID,PARTUUID`
// (blkid) reports them: IPA's block_uuid gives the filesystem UUID of a
// partition, or its PARTUUID when the filesystem has none.

// fsProbeLen is how much of a device fsUUID wants: the btrfs superblock
// sits at 64 KiB.
const fsProbeLen = 0x10000 + 4096

// fsUUID returns the filesystem type and UUID found in b, the first
// fsProbeLen bytes of a device, formatted as blkid does; both are "" when
// nothing is recognised.
func fsUUID(b []byte) (fstype, uuid string) {
	at := func(off int, magic string) bool {
		return len(b) >= off+len(magic) && string(b[off:off+len(magic)]) == magic
	}
	std := func(off int) string {
		if len(b) < off+16 {
			return ""
		}
		u := b[off : off+16]
		return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	}
	switch {
	case at(0x10040, "_BHRfS_M"):
		return "btrfs", std(0x10020)
	case at(0, "XFSB"):
		return "xfs", std(32)
	case at(0x438, "\x53\xef"):
		// ext2/3/4: s_uuid at 0x68 of the superblock at 1 KiB.
		return "ext4", std(1024 + 0x68)
	case at(4086, "SWAPSPACE2") || at(65526, "SWAPSPACE2"):
		// swap header (4 KiB or 64 KiB pages): the UUID follows bootbits
		// (1024 bytes), version, last_page and nr_badpages.
		return "swap", std(1024 + 12)
	case at(0x52, "FAT32   "):
		return "vfat", fatSerial(b[0x43:0x47])
	case at(0x36, "FAT16   ") || at(0x36, "FAT12   "):
		return "vfat", fatSerial(b[0x27:0x2b])
	case len(b) >= 16*2048+830 && b[16*2048] == 1 && at(16*2048+1, "CD001"):
		// ISO9660: blkid's UUID is the volume creation date.
		d := b[16*2048+813 : 16*2048+829]
		for _, c := range d {
			if c < '0' || c > '9' {
				return "iso9660", ""
			}
		}
		return "iso9660", fmt.Sprintf("%s-%s-%s-%s-%s-%s-%s", d[0:4], d[4:6], d[6:8], d[8:10], d[10:12], d[12:14], d[14:16])
	}
	return "", ""
}

// fatSerial renders a FAT volume serial number as blkid does (XXXX-XXXX).
func fatSerial(b []byte) string {
	v := binary.LittleEndian.Uint32(b)
	return fmt.Sprintf("%04X-%04X", v>>16, v&0xffff)
}

// partUUID returns the PARTUUID of partition n in table t: the unique GUID
// on GPT, "<disk identifier>-<nn>" on msdos (as blkid forms it).
func partUUID(t PartTable, n int) string {
	for _, p := range t.Partitions {
		if p.Number != n {
			continue
		}
		if t.Kind == "gpt" {
			return p.GUID
		}
		return fmt.Sprintf("%08x-%02x", t.MBRSignature, n)
	}
	return ""
}

// partitionParent returns the disk a partition device belongs to and its
// partition number, from sysfs.
func partitionParent(part string) (string, int, error) {
	sys, err := SysBlockDir("/", part)
	if err != nil {
		return "", 0, err
	}
	real := ResolveLink(sys)
	b, err := os.ReadFile(filepath.Join(real, "partition"))
	if err != nil {
		return "", 0, fmt.Errorf("%s is not a partition: %w", part, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return "", 0, fmt.Errorf("%s: partition number %q: %w", part, b, err)
	}
	return "/dev/" + filepath.Base(filepath.Dir(real)), n, nil
}

// ReadFSHead reads the first bytes of dev (fewer if smaller), enough for
// every file system probe of this package: labels, UUIDs, ISO 9660 and FAT.
func ReadFSHead(dev string) ([]byte, error) {
	f, err := os.Open(dev)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, fsProbeLen)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("reading the filesystem superblock of %s (%d bytes at offset 0): %w", dev, len(b), err)
	}
	return b[:n], nil
}

// BlockUUID is IPA's block_uuid: the filesystem UUID of a partition, or
// its PARTUUID when no filesystem UUID is found.
func BlockUUID(part string) (string, error) {
	head, err := ReadFSHead(part)
	if err != nil {
		return "", err
	}
	if _, u := fsUUID(head); u != "" {
		return u, nil
	}
	disk, n, err := partitionParent(part)
	if err != nil {
		return "", err
	}
	t, err := ReadPartTable(disk, sectorSizeOf(disk))
	if err != nil {
		return "", err
	}
	if u := partUUID(t, n); u != "" {
		return u, nil
	}
	return "", fmt.Errorf("no filesystem UUID and no partition UUID found for %s", part)
}

// sectorSizeOf reads the logical sector size of a disk from sysfs (512
// when it cannot be read).
func sectorSizeOf(dev string) int {
	sys, err := SysBlockDir("/", dev)
	if err != nil {
		return 512
	}
	v, err := ReadSysInt(filepath.Join(QueueDir(ResolveLink(sys)), "logical_block_size"))
	if err != nil || v <= 0 {
		return 512
	}
	return int(v)
}

// FindPartitionByUUID is IPA's get_partition: the partition of disk whose
// filesystem UUID or PARTUUID equals uuid (case-insensitive).
func FindPartitionByUUID(disk, uuid string) (string, error) {
	sector := sectorSizeOf(disk)
	t, err := ReadPartTable(disk, sector)
	if err != nil {
		return "", err
	}
	for _, p := range t.Partitions {
		if p.Size <= 0 || (t.Kind == "dos" && (p.MBRType == 0x05 || p.MBRType == 0x0f || p.MBRType == 0x85)) {
			continue
		}
		path := PartitionPath(disk, p.Number)
		if strings.EqualFold(partUUID(t, p.Number), uuid) {
			return path, nil
		}
		head, err := ReadFSHead(path)
		if err != nil {
			continue // not visible to the kernel: cannot be the one mounted
		}
		if _, u := fsUUID(head); u != "" && strings.EqualFold(u, uuid) {
			return path, nil
		}
	}
	return "", fmt.Errorf("no partition with UUID %s found on device %s", uuid, disk)
}

// FSType names the filesystem found on dev ("ext4" for ext2/3/4, "" if
// none is recognised).
func FSType(dev string) (string, error) {
	head, err := ReadFSHead(dev)
	if err != nil {
		return "", err
	}
	t, _ := fsUUID(head)
	return t, nil
}

// BootFlaggedPartitions lists the partitions of disk that parted would
// show with a "boot" flag: msdos active partitions; on GPT the EFI system
// partition (parted's boot flag there) and legacy-BIOS-bootable ones.
func BootFlaggedPartitions(disk string) ([]string, error) {
	t, err := ReadPartTable(disk, sectorSizeOf(disk))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range t.Partitions {
		if p.Boot || (t.Kind == "gpt" && p.TypeGUID == ESPTypeGUID) {
			out = append(out, PartitionPath(disk, p.Number))
		}
	}
	return out, nil
}
