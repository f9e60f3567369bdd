package partition

import (
	"context"
	"fmt"
	"os"
	"slices"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/disk"
	"github.com/diskfs/go-diskfs/partition"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// WritePartitionTable writes a fresh label ("gpt" or "msdos") holding
// parts onto dev, as a partition image's layout is written (parted's
// geometry and types), and has the kernel re-read it. Software RAID
// (deploy/raid) lays out its holder disks with it.
func WritePartitionTable(ctx context.Context, g *blockdev.Guard, dev, label string, parts []PlannedPartition) error {
	if len(parts) == 0 {
		return fmt.Errorf("no partitions to write on %s", dev)
	}
	d, err := blockdev.Open(g, dev)
	if err != nil {
		return err
	}
	size, sector := d.Size, d.SectorSize
	d.Close()
	return writePartitionTable(ctx, g, dev, label, parts, size, sector)
}

// DeletePartitions removes the numbered partitions from dev's table and
// keeps the others where they are (parted's rm), then makes the kernel
// forget them: a re-read, or BLKPG for each when another partition of
// the disk is in use.
func DeletePartitions(ctx context.Context, g *blockdev.Guard, dev string, numbers []int) error {
	if err := g.Check(dev); err != nil {
		return err
	}
	bd, err := blockdev.Open(g, dev)
	if err != nil {
		return err
	}
	size, sector := bd.Size, bd.SectorSize
	bd.Close()
	d, err := openForPartitioning(dev, size, sector)
	if err != nil {
		return err
	}
	defer d.Close()
	table, err := d.GetPartitionTable()
	if err != nil {
		return fmt.Errorf("read the partition table of %s: %w", dev, err)
	}
	switch t := table.(type) {
	case *gpt.Table:
		t.Partitions = slices.DeleteFunc(t.Partitions, func(p *gpt.Partition) bool { return slices.Contains(numbers, p.Index) })
	case *mbr.Table:
		for i, p := range t.Partitions {
			if p != nil && slices.Contains(numbers, p.Index) {
				t.Partitions[i] = &mbr.Partition{Index: p.Index, Type: mbr.Empty}
			}
		}
	default:
		return fmt.Errorf("%s: unsupported partition table type %s", dev, table.Type())
	}
	f, err := writeTable(d, table, dev, size)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dev, err)
	}
	if blockdev.RereadPartitions(ctx, f) == nil {
		return nil
	}
	for _, n := range numbers {
		if err := blockdev.RemovePartition(f, n); err != nil {
			return err
		}
	}
	return nil
}

// WaitForDevice waits up to 15 s for a partition's device node after its
// table was re-read (devtmpfs creates it soon after, not at once).
func WaitForDevice(ctx context.Context, path string) error { return waitForDevice(ctx, path) }

// openForPartitioning opens dev in go-diskfs with its real size and
// sector size (go-diskfs takes a block device's size from stat, which is
// 0, and assumes 512-byte sectors).
func openForPartitioning(dev string, size int64, sector int) (*disk.Disk, error) {
	d, err := diskfs.Open(dev, diskfs.WithOpenMode(diskfs.ReadWrite), diskfs.WithSectorSize(diskfs.SectorSize(sector)))
	if err != nil {
		return nil, fmt.Errorf("open %s for partitioning: %w", dev, err)
	}
	d.Size = size
	d.LogicalBlocksize, d.PhysicalBlocksize = int64(sector), int64(sector)
	return d, nil
}

// writeTable writes table through d without go-diskfs' own re-read and
// returns dev opened read-write, for the caller's finishing writes, sync
// and re-read (or BLKPG).
func writeTable(d *disk.Disk, table partition.Table, dev string, size int64) (*os.File, error) {
	w, err := d.Backend.Writable()
	if err != nil {
		return nil, fmt.Errorf("open %s for writing: %w", dev, err)
	}
	if err := table.Write(w, size); err != nil {
		return nil, fmt.Errorf("write %s partition table of %s: %w", table.Type(), dev, err)
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dev, err)
	}
	return f, nil
}
