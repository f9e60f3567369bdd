package mkfs

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"time"
)

// FATOptions are what a new FAT filesystem records about itself.
type FATOptions struct {
	// SectorSize is the device's logical sector size (512 if 0).
	SectorSize int
	Label      string // at most 11 bytes, stored as given (mkfs.fat -n)
	VolumeID   uint32 // the serial blkid shows as the UUID, XXXX-XXXX
	// HiddenSectors is the partition's first sector on its disk, and
	// Heads and SectorsPerTrack the disk's geometry, as mkfs.fat takes
	// them from HDIO_GETGEO (0: 255 heads, 63 sectors).
	HiddenSectors          uint32
	Heads, SectorsPerTrack uint16
	// Created stamps the volume label's directory entry (zero: none).
	Created time.Time
}

// FATLayout is the geometry FAT chooses for a size: the FAT type and
// where its structures go, in sectors.
type FATLayout struct {
	Bits              int // 12, 16 or 32
	SectorSize        int
	TotalSectors      uint32
	SectorsPerCluster int
	Reserved          int // sectors before the first FAT
	FATSectors        int // sectors of each of the two FATs
	RootEntries       int // FAT12/16 root directory slots (0 on FAT32)
	Clusters          int
}

// Cluster count limits of each FAT type (fatgen103): the type is
// determined by the count alone.
const (
	fat12MaxClusters = 4084
	fat16MaxClusters = 65524
	fat32MaxClusters = 0x0ffffff5 - 2
	fatRootEntries   = 512
	fatNumFATs       = 2
	fat32Reserved    = 32
	fat32MinSize     = 512 << 20
)

// ChooseFAT picks the FAT type mkfs.fat 4.2 picks by default for a
// hard-disk partition of size bytes: FAT32 from 512 MiB, with Microsoft's
// cluster sizes (4 KiB to 8 GiB, 8 KiB to 16 GiB, 16 KiB to 32 GiB, 32 KiB
// beyond), else FAT12 or FAT16 with clusters of at least 2 KiB, doubled
// until the count fits the type; reserved sectors are padded so the data
// area starts on a cluster boundary.
func ChooseFAT(size int64, sectorSize int) (FATLayout, error) {
	if sectorSize == 0 {
		sectorSize = 512
	}
	if sectorSize < 512 || sectorSize > 4096 || sectorSize&(sectorSize-1) != 0 {
		return FATLayout{}, fmt.Errorf("sector size %d is not 512, 1024, 2048 or 4096", sectorSize)
	}
	total := size / int64(sectorSize)
	if total > 0xffffffff {
		return FATLayout{}, fmt.Errorf("%d sectors are beyond FAT's 32-bit sector count", total)
	}
	l := FATLayout{SectorSize: sectorSize, TotalSectors: uint32(total)}
	if size >= fat32MinSize {
		mib := size >> 20
		var clusterBytes int
		switch {
		case mib > 32<<10:
			clusterBytes = 32 << 10
		case mib > 16<<10:
			clusterBytes = 16 << 10
		case mib > 8<<10:
			clusterBytes = 8 << 10
		default:
			clusterBytes = 4 << 10
		}
		l.Bits, l.SectorsPerCluster = 32, max(1, clusterBytes/sectorSize)
		if err := l.fit(fat32Reserved); err != nil {
			return l, err
		}
		return l, nil
	}
	for spc := max(1, 2048/sectorSize); spc <= 128; spc *= 2 {
		l.SectorsPerCluster, l.RootEntries = spc, fatRootEntries
		for _, bits := range []int{12, 16} {
			l.Bits = bits
			if err := l.fit(1); err != nil {
				continue
			}
			if bits == 12 && l.Clusters <= fat12MaxClusters || bits == 16 && l.Clusters > fat12MaxClusters && l.Clusters <= fat16MaxClusters {
				return l, nil
			}
		}
	}
	return l, fmt.Errorf("no FAT12 or FAT16 layout fits %d bytes", size)
}

// fit sizes the FATs for the chosen type and cluster size, with at least
// minReserved reserved sectors, padded so reserved sectors, FATs and root
// directory end on a cluster boundary.
func (l *FATLayout) fit(minReserved int) error {
	rootSectors := (l.RootEntries*32 + l.SectorSize - 1) / l.SectorSize
	total := int(l.TotalSectors)
	spc := l.SectorsPerCluster
	// Grow the FAT until it covers every cluster the rest leaves.
	for fatSectors := 1; ; fatSectors++ {
		meta := minReserved + fatNumFATs*fatSectors + rootSectors
		reserved := minReserved + (spc-meta%spc)%spc
		meta = reserved + fatNumFATs*fatSectors + rootSectors
		if meta >= total {
			return fmt.Errorf("%d sectors leave no data area for FAT%d", total, l.Bits)
		}
		clusters := (total - meta) / spc
		if clusters < 1 {
			return fmt.Errorf("%d sectors leave no cluster for FAT%d", total, l.Bits)
		}
		if (clusters+2)*l.Bits <= fatSectors*l.SectorSize*8 {
			l.Reserved, l.FATSectors, l.Clusters = reserved, fatSectors, clusters
			if l.Bits == 32 && clusters <= fat16MaxClusters {
				return fmt.Errorf("%d clusters are too few for FAT32", clusters)
			}
			if l.Bits == 32 && clusters > fat32MaxClusters {
				return fmt.Errorf("%d clusters are too many for FAT32's 28-bit entries", clusters)
			}
			return nil
		}
	}
}

// fatLabel is the 11-byte label field: the label space-padded, or "NO
// NAME" as mkfs.fat writes without one.
func fatLabel(label string) ([11]byte, error) {
	var b [11]byte
	if len(label) > len(b) {
		return b, fmt.Errorf("FAT label %q is longer than 11 bytes", label)
	}
	if label == "" {
		label = "NO NAME"
	}
	copy(b[:], label+strings.Repeat(" ", len(b)-len(label)))
	return b, nil
}

// bootCode is the boot code of a non-bootable FAT volume, for a machine
// that boots the partition by mistake: print bootMessage (its address is
// patched in at byte 3), wait for a key, then ask the BIOS for the next
// boot device (int 19h).
var bootCode = []byte{
	0x0e, 0x1f, 0xbe, 0x5b, 0x7c, 0xac, 0x22, 0xc0, 0x74, 0x0b, 0x56, 0xb4, 0x0e, 0xbb, 0x07, 0x00,
	0xcd, 0x10, 0x5e, 0xeb, 0xf0, 0x32, 0xe4, 0xcd, 0x16, 0xcd, 0x19, 0xeb, 0xfe,
}

const bootMessage = "This is not a bootable disk.  Please insert a bootable floppy and\r\npress any key to try again ... \r\n"

// bootSector builds sector 0 (and FAT32's backup at sector 6).
func (l FATLayout) bootSector(o FATOptions, label [11]byte) []byte {
	b := make([]byte, l.SectorSize)
	le := binary.LittleEndian
	copy(b[3:11], "MSWIN4.1") // the OEM name fatgen103 recommends
	le.PutUint16(b[11:], uint16(l.SectorSize))
	b[13] = byte(l.SectorsPerCluster)
	le.PutUint16(b[14:], uint16(l.Reserved))
	b[16] = fatNumFATs
	le.PutUint16(b[17:], uint16(l.RootEntries))
	if l.TotalSectors < 0x10000 && l.Bits != 32 {
		le.PutUint16(b[19:], uint16(l.TotalSectors))
	} else {
		le.PutUint32(b[32:], l.TotalSectors)
	}
	b[21] = 0xf8 // fixed disk
	heads, spt := o.Heads, o.SectorsPerTrack
	if heads == 0 || spt == 0 {
		heads, spt = 255, 63
	}
	le.PutUint16(b[24:], spt)
	le.PutUint16(b[26:], heads)
	le.PutUint32(b[28:], o.HiddenSectors)
	ext := 36 // the extended BPB of FAT12/16
	typ := fmt.Sprintf("FAT%d   ", l.Bits)
	if l.Bits == 32 {
		le.PutUint32(b[36:], uint32(l.FATSectors))
		le.PutUint32(b[44:], 2) // root directory cluster
		le.PutUint16(b[48:], 1) // FSInfo sector
		le.PutUint16(b[50:], 6) // backup boot sector
		ext = 64
	} else {
		le.PutUint16(b[22:], uint16(l.FATSectors))
	}
	b[ext] = 0x80   // drive number: first hard disk
	b[ext+2] = 0x29 // extended boot signature: the next three fields are valid
	le.PutUint32(b[ext+3:], o.VolumeID)
	copy(b[ext+7:ext+18], label[:])
	copy(b[ext+18:ext+26], typ)
	code := ext + 26
	b[0], b[1], b[2] = 0xeb, byte(code-2), 0x90 // jmp short to the boot code
	c := append([]byte(nil), bootCode...)
	// The code loads the message's address (mov si, imm16) at byte 3.
	le.PutUint16(c[3:], uint16(0x7c00+code+len(bootCode)))
	copy(b[code:], c)
	copy(b[code+len(c):], bootMessage)
	b[510], b[511] = 0x55, 0xaa
	return b
}

// fsInfo builds FAT32's FSInfo sector: signatures, the free cluster count
// (all but the root directory's) and where to look for a free one.
func (l FATLayout) fsInfo() []byte {
	b := make([]byte, l.SectorSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], 0x41615252)
	le.PutUint32(b[484:], 0x61417272)
	le.PutUint32(b[488:], uint32(l.Clusters-1))
	le.PutUint32(b[492:], 3)
	le.PutUint32(b[508:], 0xaa550000)
	return b
}

// fatStart is the first sector of the FAT: the media byte in entry 0,
// end-of-chain in entry 1 (clean shutdown, no I/O error bits), and on
// FAT32 end-of-chain for the root directory's cluster 2.
func (l FATLayout) fatStart() []byte {
	b := make([]byte, l.SectorSize)
	switch l.Bits {
	case 12:
		copy(b, []byte{0xf8, 0xff, 0xff})
	case 16:
		copy(b, []byte{0xf8, 0xff, 0xff, 0xff})
	case 32:
		binary.LittleEndian.PutUint32(b[0:], 0x0ffffff8)
		binary.LittleEndian.PutUint32(b[4:], 0x0fffffff)
		binary.LittleEndian.PutUint32(b[8:], 0x0ffffff8)
	}
	return b
}

// dosDateTime encodes t as a FAT directory entry's time and date.
func dosDateTime(t time.Time) (uint16, uint16) {
	if t.IsZero() || t.Year() < 1980 || t.Year() > 2107 {
		return 0, 0
	}
	return uint16(t.Hour()<<11 | t.Minute()<<5 | t.Second()/2), uint16((t.Year()-1980)<<9 | int(t.Month())<<5 | t.Day())
}

// rootStart is the first sector of the root directory: the volume label
// entry (attribute 08h), where blkid and Linux read the label first.
func (l FATLayout) rootStart(o FATOptions, label [11]byte) []byte {
	b := make([]byte, l.SectorSize)
	if o.Label == "" {
		return b
	}
	copy(b[0:11], label[:])
	b[11] = 0x08
	tm, dt := dosDateTime(o.Created)
	le := binary.LittleEndian
	le.PutUint16(b[14:], tm)
	le.PutUint16(b[16:], dt)
	le.PutUint16(b[18:], dt)
	le.PutUint16(b[22:], tm)
	le.PutUint16(b[24:], dt)
	return b
}

// WriteFAT formats the size bytes at the start of w as an empty FAT
// filesystem (ChooseFAT's layout): boot sector, FSInfo and their backups
// on FAT32, both FATs and the root directory are written in full, the
// data area is left as it is.
func WriteFAT(w io.WriterAt, size int64, o FATOptions) (FATLayout, error) {
	l, err := ChooseFAT(size, o.SectorSize)
	if err != nil {
		return l, err
	}
	label, err := fatLabel(o.Label)
	if err != nil {
		return l, err
	}
	ss := int64(l.SectorSize)
	rootSectors := (l.RootEntries*32 + l.SectorSize - 1) / l.SectorSize
	if l.Bits == 32 {
		rootSectors = l.SectorsPerCluster
	}
	// Zero everything up to the data area, and the root directory.
	zeroEnd := int64(l.Reserved+fatNumFATs*l.FATSectors+rootSectors) * ss
	zero := make([]byte, 256<<10)
	for off := int64(0); off < zeroEnd; off += int64(len(zero)) {
		n := min(int64(len(zero)), zeroEnd-off)
		if _, err := w.WriteAt(zero[:n], off); err != nil {
			return l, fmt.Errorf("zero FAT metadata at byte %d: %w", off, err)
		}
	}
	boot := l.bootSector(o, label)
	type sectorWrite struct {
		sector int
		b      []byte
	}
	writes := []sectorWrite{{0, boot}}
	if l.Bits == 32 {
		info := l.fsInfo()
		writes = append(writes, sectorWrite{1, info}, sectorWrite{6, boot}, sectorWrite{7, info})
	}
	fat := l.fatStart()
	for i := range fatNumFATs {
		writes = append(writes, sectorWrite{l.Reserved + i*l.FATSectors, fat})
	}
	writes = append(writes, sectorWrite{l.Reserved + fatNumFATs*l.FATSectors, l.rootStart(o, label)})
	for _, wr := range writes {
		if _, err := w.WriteAt(wr.b, int64(wr.sector)*ss); err != nil {
			return l, fmt.Errorf("write FAT sector %d: %w", wr.sector, err)
		}
	}
	return l, nil
}
