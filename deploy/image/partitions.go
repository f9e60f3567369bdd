package image

import (
	"fmt"
	"io"
	"os"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/ipaerror"
	"golang.org/x/sys/unix"
)

// ValidatePartitioning is IPA's _validate_partitioning after a whole-disk
// image: the device must now hold a readable partition table with at least
// one partition, else the image was junk (or made for another sector
// size) and the deploy fails instead of leaving an unbootable disk. The
// table is parsed in Go (IPA runs partprobe and parted).
func ValidatePartitioning(dev string) error {
	f, err := os.Open(dev)
	if err != nil {
		return err
	}
	defer f.Close()
	sector := 512
	if st, err := f.Stat(); err == nil && st.Mode()&os.ModeDevice != 0 {
		if n, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKSSZGET); err == nil && n > 0 {
			sector = n
		}
	}
	head := make([]byte, 34*sector)
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return fmt.Errorf("reading the partition table of %s (%d bytes at offset 0): %w", dev, len(head), err)
	}
	pt, err := blockdev.ParsePartTable(f, head[:n], sector)
	if err != nil {
		e := ipaerror.DeploymentError("Unable to find a valid partition table on the disk after writing the image. The image may be corrupted or it uses a different sector size than the device. Error: " + err.Error())
		e.Err = err
		return e
	}
	if len(pt.Partitions) == 0 {
		return ipaerror.DeploymentError(fmt.Sprintf("No partitions found on the device %s after writing the image.", dev))
	}
	return nil
}
