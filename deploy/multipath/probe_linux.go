package multipath

import (
	"context"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// probeSize is what DirectIO reads: one 4 KiB block, a whole logical
// block of every disk (512 or 4096 bytes).
const probeSize = 4096

// DirectIO is multipath-tools' directio path checker: it reads the first
// block of the path device with O_DIRECT, so the answer comes from the
// LUN through that path and not from the page cache. It reads, never
// writes, and works for every SCSI transport (multipathd's default "tur"
// checker sends TEST UNIT READY instead, which some targets answer while
// their reads fail).
func DirectIO(ctx context.Context, dev string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("directio check: %w", err)
	}
	defer f.Close()
	buf, release, err := blockdev.AlignedBuffer(probeSize)
	if err != nil {
		return fmt.Errorf("directio check of %s: %w", dev, err)
	}
	defer release()
	n, err := f.ReadAt(buf, 0)
	if err != nil {
		return fmt.Errorf("directio check: %w", err)
	}
	if n != probeSize {
		return fmt.Errorf("directio check of %s: read %d of %d bytes", dev, n, probeSize)
	}
	return nil
}
