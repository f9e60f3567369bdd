package blockdev

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
)

// Read-only probes of on-disk structures, done in Go instead of lsblk,
// blkid and hexdump: partition tables (for the shared-filesystem safety
// check, the config drive and get_partition_uuids), RAID superblocks and
// a few filesystem signatures. Every parser takes bytes, so it is fuzzed
// without a disk.
//
// Partition tables are written with go-diskfs (deploy/partition,
// deploy/image) but read here, on purpose: go-diskfs' gpt.Read returns an
// error when the primary header and its backup both fail their signature
// or CRC checks, while this reader must describe whatever a disk holds (it
// checks no CRC), because it runs on disks about to be erased (the
// shared-filesystem safety check, the metadata wipe) where half-wiped or
// corrupt tables are the normal case; it never fails on garbage (an
// unrecognised table is Kind ""). It also keeps fields go-diskfs does not
// expose (the on-disk partition GUID bytes for boot entries, the backup
// header LBA, the MBR disk signature) and reads through an io.ReaderAt at
// the device's logical sector size, where go-diskfs sizes a block device
// by stat (0 bytes).

// PartEntry is one partition of an MBR or GPT table.
type PartEntry struct {
	Number   int
	Start    int64    // bytes
	Size     int64    // bytes
	MBRType  byte     // MBR partition type (0 on GPT)
	TypeGUID string   // GPT partition type GUID, lower case (empty on MBR)
	GUID     string   // GPT unique partition GUID, lower case
	rawGUID  [16]byte // the same as stored on disk (boot entries carry it)
	Name     string   // GPT partition name
	// Boot is the msdos active flag, or on GPT the legacy BIOS bootable
	// attribute (bit 2).
	Boot bool
}

// PartTable is a parsed partition table.
type PartTable struct {
	Kind          string // "gpt", "dos" or "" (none)
	MBRSignature  uint32 // bytes 440-443, little endian
	DiskGUID      string // GPT disk GUID, lower case
	Partitions    []PartEntry
	SectorSize    int
	FirstUsable   int64 // GPT, in sectors
	LastUsable    int64 // GPT, in sectors
	EntriesLBA    int64 // GPT
	NumEntries    int   // GPT
	EntrySize     int   // GPT
	BackupHdrLBA  int64 // GPT alternate header LBA from the primary
	HasProtective bool  // MBR holds a 0xEE protective entry
}

// GUIDString renders a GPT mixed-endian GUID as text.
func GUIDString(b []byte) string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x",
		binary.LittleEndian.Uint32(b[0:4]), binary.LittleEndian.Uint16(b[4:6]),
		binary.LittleEndian.Uint16(b[6:8]), b[8:10], b[10:16])
}

// ParsePartTable reads the table from head, the first bytes of a disk
// (at least 2 sectors; GPT entries are read through r when they lie
// beyond head). It never fails on garbage: an unrecognised table is
// Kind "".
func ParsePartTable(r io.ReaderAt, head []byte, sector int) (PartTable, error) {
	t := PartTable{SectorSize: sector}
	if len(head) < 512 || head[510] != 0x55 || head[511] != 0xAA {
		return t, nil
	}
	t.MBRSignature = binary.LittleEndian.Uint32(head[440:444])
	var mbrParts []PartEntry
	for i := 0; i < 4; i++ {
		e := head[446+16*i : 446+16*(i+1)]
		typ := e[4]
		if typ == 0 {
			continue
		}
		if typ == 0xEE {
			t.HasProtective = true
		}
		mbrParts = append(mbrParts, PartEntry{
			Number:  i + 1,
			Boot:    e[0]&0x80 != 0,
			MBRType: typ,
			Start:   int64(binary.LittleEndian.Uint32(e[8:12])) * 512,
			Size:    int64(binary.LittleEndian.Uint32(e[12:16])) * 512,
		})
	}
	if t.HasProtective && len(head) >= 2*sector && sector >= 92 {
		if gpt, ok, err := parseGPT(r, head, sector); err != nil {
			return t, err
		} else if ok {
			gpt.MBRSignature = t.MBRSignature
			gpt.HasProtective = true
			return gpt, nil
		}
	}
	// A FAT or NTFS boot sector also ends in 55AA; call it a partition
	// table only when the entries look like one (IPA relies on lsblk,
	// which uses the same kind of heuristics).
	for _, p := range mbrParts {
		if p.Size == 0 || head[446+16*(p.Number-1)]&0x7f != 0 {
			return t, nil
		}
	}
	t.Kind = "dos"
	t.Partitions = mbrParts
	return t, nil
}

var gptSignature = []byte("EFI PART")

func parseGPT(r io.ReaderAt, head []byte, sector int) (PartTable, bool, error) {
	h := head[sector : 2*sector]
	if !bytes.Equal(h[0:8], gptSignature) {
		return PartTable{}, false, nil
	}
	t := PartTable{Kind: "gpt", SectorSize: sector}
	t.BackupHdrLBA = int64(binary.LittleEndian.Uint64(h[32:40]))
	t.FirstUsable = int64(binary.LittleEndian.Uint64(h[40:48]))
	t.LastUsable = int64(binary.LittleEndian.Uint64(h[48:56]))
	t.DiskGUID = GUIDString(h[56:72])
	t.EntriesLBA = int64(binary.LittleEndian.Uint64(h[72:80]))
	t.NumEntries = int(binary.LittleEndian.Uint32(h[80:84]))
	t.EntrySize = int(binary.LittleEndian.Uint32(h[84:88]))
	if t.EntrySize < 128 || t.EntrySize > 4096 || t.NumEntries < 0 || t.NumEntries > 1024 ||
		t.EntriesLBA < 2 || t.EntriesLBA > 1<<40 {
		return PartTable{}, false, nil
	}
	buf := make([]byte, t.NumEntries*t.EntrySize)
	off := t.EntriesLBA * int64(sector)
	if end := off + int64(len(buf)); end <= int64(len(head)) {
		copy(buf, head[off:end])
	} else if r == nil {
		return PartTable{}, false, nil
	} else if _, err := r.ReadAt(buf, off); err != nil {
		return PartTable{}, false, fmt.Errorf("read GPT entries at byte %d: %w", off, err)
	}
	zero := make([]byte, 16)
	for i := 0; i < t.NumEntries; i++ {
		e := buf[i*t.EntrySize : (i+1)*t.EntrySize]
		if bytes.Equal(e[0:16], zero) {
			continue
		}
		first := int64(binary.LittleEndian.Uint64(e[32:40]))
		last := int64(binary.LittleEndian.Uint64(e[40:48]))
		var name []rune
		for j := 56; j+1 < 128; j += 2 {
			c := binary.LittleEndian.Uint16(e[j : j+2])
			if c == 0 {
				break
			}
			name = append(name, rune(c))
		}
		size := int64(0)
		if last >= first {
			size = (last - first + 1) * int64(sector)
		}
		t.Partitions = append(t.Partitions, PartEntry{
			Number:   i + 1,
			Start:    first * int64(sector),
			Size:     size,
			TypeGUID: GUIDString(e[0:16]),
			GUID:     GUIDString(e[16:32]),
			Name:     string(name),
			Boot:     binary.LittleEndian.Uint64(e[48:56])&(1<<2) != 0,
		})
		copy(t.Partitions[len(t.Partitions)-1].rawGUID[:], e[16:32])
	}
	return t, true, nil
}

// ReadPartTable opens dev read-only and parses its partition table.
func ReadPartTable(dev string, sector int) (PartTable, error) {
	f, err := os.Open(dev)
	if err != nil {
		return PartTable{}, err
	}
	defer f.Close()
	head := make([]byte, 34*sector)
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return PartTable{}, fmt.Errorf("reading the partition table of %s (%d bytes at offset 0): %w", dev, len(head), err)
	}
	return ParsePartTable(f, head[:n], sector)
}

// EFI system partition type GUID.
const ESPTypeGUID = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"

// fsSignature names the filesystem or container signature found at the
// start of a device, from its first fsProbeLen bytes ("" if none): the
// containers the erase rules look for (md, gfs2, LVM) here, filesystems
// as fsUUID recognises them.
func fsSignature(b []byte) string {
	at := func(off int, magic []byte) bool {
		return len(b) >= off+len(magic) && bytes.Equal(b[off:off+len(magic)], magic)
	}
	switch {
	case at(4096, mdMagic):
		return "linux_raid_member" // md 1.2
	case at(0, mdMagic):
		return "linux_raid_member" // md 1.1
	case at(65536, []byte{0x01, 0x16, 0x19, 0x70, 0, 0, 0, 1}):
		return "gfs2" // meta header magic + type SB, big endian, at 64 KiB
	case at(512, []byte("LABELONE")) || at(0, []byte("LABELONE")) || at(1024, []byte("LABELONE")) || at(1536, []byte("LABELONE")):
		return "LVM2_member"
	}
	t, _ := fsUUID(b)
	return t
}

// md superblock magic 0xa92b4efc, little endian on disk.
var mdMagic = []byte{0xfc, 0x4e, 0x2b, 0xa9}

// mdSuperblockAtEnd reports whether an md 1.0 or 0.90 superblock (both
// kept near the end of the device) is present.
func mdSuperblockAtEnd(r io.ReaderAt, size int64) bool {
	var offs []int64
	if s := size / 512; s > 16 {
		offs = append(offs, ((s-16)&^7)*512) // 1.0
	}
	if s := size / 512; s > 128 {
		offs = append(offs, ((s&^127)-128)*512) // 0.90
	}
	buf := make([]byte, 4)
	for _, off := range offs {
		if _, err := r.ReadAt(buf, off); err == nil && bytes.Equal(buf, mdMagic) {
			return true
		}
	}
	return false
}

// Probe reads the signatures of one device: its filesystem or
// container type as fsSignature names it, and md superblocks at the end.
func Probe(dev string) (string, error) {
	f, err := os.Open(dev)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, fsProbeLen)
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("probing %s for signatures (%d bytes at offset 0): %w", dev, len(head), err)
	}
	if sig := fsSignature(head[:n]); sig != "" {
		return sig, nil
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err == nil && mdSuperblockAtEnd(f, size) {
		return "linux_raid_member", nil
	}
	return "", nil
}

// ISOVolumeID returns the ISO9660 volume identifier (trimmed) from the
// primary volume descriptor at 32 KiB, or "".
func ISOVolumeID(b []byte) string {
	const pvd = 16 * 2048
	if len(b) < pvd+72 || b[pvd] != 1 || !bytes.Equal(b[pvd+1:pvd+6], []byte("CD001")) {
		return ""
	}
	return strings.TrimRight(string(b[pvd+40:pvd+72]), " \x00")
}

// ISOPublisherID returns the ISO9660 publisher identifier (trimmed) from
// the primary volume descriptor at 32 KiB, or "": what mkisofs -publisher
// wrote, which Ironic sets to the ir_pub_id of the ISO's kernel command
// line (udev's ID_FS_PUBLISHER_ID).
func ISOPublisherID(b []byte) string {
	const pvd = 16 * 2048
	if len(b) < pvd+446 || b[pvd] != 1 || !bytes.Equal(b[pvd+1:pvd+6], []byte("CD001")) {
		return ""
	}
	return strings.TrimRight(string(b[pvd+318:pvd+446]), " \x00")
}

// FATLabel returns the FAT volume label of a boot sector, or "".
func FATLabel(b []byte) string {
	switch {
	case len(b) >= 0x5a && bytes.Equal(b[0x52:0x57], []byte("FAT32")):
		return strings.TrimRight(string(b[0x47:0x52]), " \x00")
	case len(b) >= 0x3e && bytes.Equal(b[0x36:0x39], []byte("FAT")):
		return strings.TrimRight(string(b[0x2b:0x36]), " \x00")
	}
	return ""
}
