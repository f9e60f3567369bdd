package blockdev

import (
	"context"
	"fmt"
	"sort"
)

// The metadata wipe (IPA's destroy_disk_metadata: wipefs --all, dd of the
// first and last sectors, sgdisk -Z) done in Go. Rather than probing for
// each signature as wipefs does, it zeroes every place one can live:
//
//   - IPA's own geometry at both ends: 33 x 512-byte sectors (5 x 4096 on
//     4Kn disks), which covers the protective MBR, the primary GPT header
//     and entries, and the backup GPT at the end.
//   - The first and last MiB: ext2/3/4 (1 KiB), XFS, FAT, NTFS (sector 0),
//     LVM2 labels (sectors 0-3), md 1.1/1.2 (0, 4 KiB), bcache (4 KiB),
//     swap (end of the first page, up to 64 KiB pages), ISO9660 (32 KiB),
//     btrfs and GFS2 primary superblocks (64 KiB), ZFS labels (0, 256 KiB
//     and the last 512 KiB), LUKS1/2 headers, md 1.0 and 0.90 (within the
//     last 128 KiB), and anything a partition-table tool keeps at the end.
//   - The btrfs mirror superblocks at 64 MiB and 256 GiB.

// wipeRegion is one byte range to zero, with the reason it is zeroed.
type wipeRegion struct {
	off, len int64
	what     string
}

// MiB is a mebibyte, the unit of IPA's sizes and of the wiped regions.
const MiB = 1 << 20

// metadataRegions returns the regions to zero on a device of size bytes
// with the given logical sector size, merged and in offset order.
func metadataRegions(size int64, sector int) ([]wipeRegion, error) {
	var n int64
	switch sector {
	case 512:
		n = 33
	case 4096:
		n = 5
	default:
		return nil, fmt.Errorf("logical sector size %d is not handled (IPA handles 512 and 4096)", sector)
	}
	ipa := n * int64(sector)
	var regs []wipeRegion
	add := func(off, l int64, what string) {
		if off < 0 {
			l += off
			off = 0
		}
		if off+l > size {
			l = size - off
		}
		if l > 0 {
			regs = append(regs, wipeRegion{off, l, what})
		}
	}
	add(0, ipa, "partition table (start)")
	add(size-ipa, ipa, "backup partition table (end)")
	add(0, MiB, "superblocks in the first MiB")
	add(size-MiB, MiB, "superblocks in the last MiB")
	add(64*MiB, 4096, "btrfs mirror superblock")
	add(256<<30, 4096, "btrfs mirror superblock")
	// Align every region to whole sectors for O_DIRECT.
	s := int64(sector)
	for i := range regs {
		end := (regs[i].off + regs[i].len + s - 1) / s * s
		regs[i].off = regs[i].off / s * s
		if end > size {
			end = size / s * s
		}
		regs[i].len = end - regs[i].off
	}
	sort.Slice(regs, func(i, j int) bool { return regs[i].off < regs[j].off })
	var merged []wipeRegion
	for _, r := range regs {
		if r.len <= 0 {
			continue
		}
		if k := len(merged) - 1; k >= 0 && r.off <= merged[k].off+merged[k].len {
			if e := r.off + r.len; e > merged[k].off+merged[k].len {
				merged[k].len = e - merged[k].off
			}
			merged[k].what += ", " + r.what
			continue
		}
		merged = append(merged, r)
	}
	return merged, nil
}

// WipeMetadata zeroes the metadata regions of one device (a disk or a
// partition) and, for a disk, makes the kernel re-read its now empty
// partition table. It returns the number of bytes zeroed.
func WipeMetadata(ctx context.Context, g *Guard, dev string) (int64, error) {
	d, err := Open(g, dev)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	regs, err := metadataRegions(d.Size, d.SectorSize)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", dev, err)
	}
	var total int64
	for _, r := range regs {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		if err := d.writeZeroes(r.off, r.len); err != nil {
			return total, fmt.Errorf("zero %s of %s (bytes %d-%d): %w", r.what, dev, r.off, r.off+r.len, err)
		}
		total += r.len
	}
	if err := d.File.Sync(); err != nil {
		return total, fmt.Errorf("sync %s: %w", dev, err)
	}
	if d.IsBlock() {
		if err := RereadPartitions(ctx, d.File); err != nil {
			return total, err
		}
	}
	return total, nil
}

// writeZeroes writes real zero bytes (not a discard: the result must not
// depend on what the device does with unmapped blocks).
func (d *Device) writeZeroes(off, length int64) error {
	const chunk = MiB
	buf, free, err := AlignedBuffer(chunk)
	if err != nil {
		return err
	}
	defer free()
	for length > 0 {
		n := int64(chunk)
		if length < n {
			n = length
		}
		if _, err := d.File.WriteAt(buf[:n], off); err != nil {
			return err
		}
		off += n
		length -= n
	}
	return nil
}
