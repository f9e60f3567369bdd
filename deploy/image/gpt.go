package image

import (
	"errors"
	"fmt"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/disk"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// FixGPTBackup is IPA's fix_gpt_partition after a whole-disk image: an
// image smaller than the disk leaves the GPT backup header at the image's
// end, where `sgdisk -v` reports damage and tools that add partitions
// (the config drive) would start from a wrong last usable sector. It moves
// the backup header and the last usable sector to the real end of the
// disk (go-diskfs, no sgdisk). It reports whether anything was moved;
// disks without a GPT are left alone.
func FixGPTBackup(g *blockdev.Guard, dev string) (bool, error) {
	bd, err := blockdev.Open(g, dev)
	if err != nil {
		return false, err
	}
	size, sector := bd.Size, bd.SectorSize
	bd.Close()
	pt, err := blockdev.ReadPartTable(dev, sector)
	if err != nil || pt.Kind != "gpt" {
		return false, nil
	}
	lastLBA := size/int64(sector) - 1
	if pt.BackupHdrLBA == lastLBA {
		return false, nil
	}
	d, err := diskfs.Open(dev, diskfs.WithOpenMode(diskfs.ReadWrite), diskfs.WithSectorSize(diskfs.SectorSize(sector)))
	if err != nil {
		return false, fmt.Errorf("open %s to move the GPT backup header: %w", dev, err)
	}
	defer d.Close()
	// go-diskfs takes a block device's size from stat, which is 0.
	d.Size = size
	d.LogicalBlocksize, d.PhysicalBlocksize = int64(sector), int64(sector)
	table, err := d.GetPartitionTable()
	if err != nil {
		return false, fmt.Errorf("reading the GPT of %s: %w", dev, err)
	}
	t, ok := table.(*gpt.Table)
	if !ok {
		return false, nil
	}
	t.Resize(uint64(size))
	if err := d.Partition(t); err != nil && !errors.Is(err, disk.ErrReReadDeferred) {
		return false, fmt.Errorf("writing the GPT of %s with its backup at the end: %w", dev, err)
	}
	return true, nil
}
