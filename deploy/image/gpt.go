package image

import (
	"errors"
	"fmt"

	"os"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/partition"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"golang.org/x/sys/unix"
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
	// Not the top-level go-diskfs and disk packages: they link every
	// filesystem go-diskfs knows, whose package initialisation every agent
	// command would pay at start.
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return false, fmt.Errorf("open %s to move the GPT backup header: %w", dev, err)
	}
	defer f.Close()
	table, err := partition.Read(file.New(f, false), sector, sector)
	if err != nil {
		return false, fmt.Errorf("reading the GPT of %s: %w", dev, err)
	}
	t, ok := table.(*gpt.Table)
	if !ok {
		return false, nil
	}
	t.Resize(uint64(size))
	if err := t.Write(f, size); err != nil {
		return false, fmt.Errorf("writing the GPT of %s with its backup at the end: %w", dev, err)
	}
	// A busy disk keeps its old table in the kernel until it is re-read;
	// the one on disk is right, which is what the deploy needs.
	if err := blockdev.RereadPartitionsOnce(f); err != nil && !errors.Is(err, unix.EBUSY) {
		return false, fmt.Errorf("writing the GPT of %s with its backup at the end: %w", dev, err)
	}
	return true, nil
}
