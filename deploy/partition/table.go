package partition

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/partition"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"golang.org/x/sys/unix"
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

// tableDisk is a disk opened for go-diskfs' partition packages. The
// top-level go-diskfs and disk packages are not used: they link every
// filesystem go-diskfs knows (ext4, FAT, ISO 9660, squashfs with its
// compressors), whose package initialisation every agent command, the
// inventory among them, would pay at start.
type tableDisk struct {
	f      *os.File
	b      backend.Storage
	size   int64
	sector int
}

// openForPartitioning opens dev read-write with its real size and sector
// size (go-diskfs takes a block device's size from stat, which is 0, and
// assumes 512-byte sectors).
func openForPartitioning(dev string, size int64, sector int) (*tableDisk, error) {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s for partitioning: %w", dev, err)
	}
	return &tableDisk{f: f, b: file.New(f, false), size: size, sector: sector}, nil
}

// GetPartitionTable reads the GPT or, failing that, the MBR of d.
func (d *tableDisk) GetPartitionTable() (partition.Table, error) {
	return partition.Read(d.b, d.sector, d.sector)
}

// Close closes the device.
func (d *tableDisk) Close() error { return d.f.Close() }

// partition writes table onto d and asks the kernel once to re-read it,
// as go-diskfs' disk.Partition did: a busy disk's EBUSY is returned for
// the caller to judge.
func (d *tableDisk) partition(table partition.Table) error {
	if err := table.Write(d.f, d.size); err != nil {
		return fmt.Errorf("failed to write partition table: %w", err)
	}
	return blockdev.RereadPartitionsOnce(d.f)
}

// writeTable writes table through d without a re-read and returns dev
// opened read-write, for the caller's finishing writes, sync and re-read
// (or BLKPG).
func writeTable(d *tableDisk, table partition.Table, dev string, size int64) (*os.File, error) {
	w, err := d.b.Writable()
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

// AddPartition adds one partition of size bytes to the GPT of dev, in the
// first gap of the table where it fits starting on a 1 MiB boundary,
// numbered with the lowest free number and named name, and makes the
// kernel know it (a re-read, or BLKPG when other partitions of the disk
// are in use, as an md member is). Its type comes from p's flags and
// FSType as WritePartitionTable gives it (boot: an EFI system partition,
// bios_grub: a BIOS boot partition). It returns the new partition's
// number. It is sgdisk -n 0:<first free>:+<size> -t -c, which software
// RAID's boot partitions are made with.
func AddPartition(ctx context.Context, g *blockdev.Guard, dev string, size int64, p PlannedPartition, name string) (int, error) {
	if err := g.Check(dev); err != nil {
		return 0, err
	}
	// Not blockdev.Open: its O_EXCL is refused while a partition of the
	// disk is an md member, which is when boot partitions are added.
	diskSize, sector, err := geometry(dev)
	if err != nil {
		return 0, err
	}
	d, err := openForPartitioning(dev, diskSize, sector)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	table, err := d.GetPartitionTable()
	if err != nil {
		return 0, fmt.Errorf("read the partition table of %s: %w", dev, err)
	}
	t, ok := table.(*gpt.Table)
	if !ok {
		return 0, fmt.Errorf("%s: a %s partition table; only GPT gets partitions added", dev, table.Type())
	}
	s := int64(sector)
	start, err := firstGap(t.Partitions, size, s, diskSize)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", dev, err)
	}
	n := 1
	for slices.ContainsFunc(t.Partitions, func(q *gpt.Partition) bool { return q.Index == n }) {
		n++
	}
	p.Number, p.Start, p.Size = n, start, size
	t.Partitions = append(t.Partitions, &gpt.Partition{Index: n, Start: uint64(start / s), End: uint64((start+size)/s - 1),
		Size: uint64(size), Type: gptType(p), Name: name})
	f, err := writeTable(d, t, dev, diskSize)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("sync %s: %w", dev, err)
	}
	if blockdev.RereadPartitions(ctx, f) != nil {
		if err := kernelKnowsPartition(dev, n, sector); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// firstGap is where a partition of size bytes starts in the first gap of
// parts it fits in, on a 1 MiB boundary, before the backup GPT (33
// sectors at the end of a disk of diskSize bytes).
func firstGap(parts []*gpt.Partition, size, sector, diskSize int64) (int64, error) {
	sorted := slices.Clone(parts)
	slices.SortFunc(sorted, func(a, b *gpt.Partition) int { return cmp.Compare(a.Start, b.Start) })
	align := func(b int64) int64 { return (b + blockdev.MiB - 1) / blockdev.MiB * blockdev.MiB }
	start := int64(blockdev.MiB)
	for _, q := range sorted {
		if start+size <= int64(q.Start)*sector {
			return start, nil
		}
		start = max(start, align((int64(q.End)+1)*sector))
	}
	if end := diskSize - 33*sector; start+size <= end {
		return start, nil
	}
	return 0, fmt.Errorf("no free space of %d MiB on a 1 MiB boundary", size/blockdev.MiB)
}

// geometry is a block device's size and logical sector size, read
// through a shared, read-only open.
func geometry(dev string) (int64, int, error) {
	f, err := os.Open(dev)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	size, err := blockdev.IoctlGetUint64(f, unix.BLKGETSIZE64)
	if err != nil {
		return 0, 0, fmt.Errorf("BLKGETSIZE64 %s: %w", dev, err)
	}
	ss, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKSSZGET)
	if err != nil {
		return 0, 0, fmt.Errorf("BLKSSZGET %s: %w", dev, err)
	}
	return int64(size), ss, nil
}
