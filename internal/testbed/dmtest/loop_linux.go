package dmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Loop is a loop device over a block device (a device-mapper disk
// made with this package): such disks have no partitions of their own, so
// partitioning and config-drive work runs on a loop device with partition
// scanning over one. Direct I/O makes the loop pass each write straight to
// the dm device, so its errors come back on that write, as a disk's do,
// not later from the page cache.
type Loop struct {
	Path string // /dev/loopN
	f    *os.File
}

// AttachLoop attaches backing to a free loop device with partition
// scanning and direct I/O.
func AttachLoop(ctx context.Context, backing string) (*Loop, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dmtest: %w", err)
	}
	n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
	ctl.Close()
	if err != nil {
		return nil, fmt.Errorf("dmtest: LOOP_CTL_GET_FREE: %w", err)
	}
	path := fmt.Sprintf("/dev/loop%d", n)
	var f *os.File
	for {
		// devtmpfs makes the node right after the device is added.
		if f, err = os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC, 0); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dmtest: waiting for %s: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err != nil {
		return nil, fmt.Errorf("dmtest: %w", err)
	}
	b, err := os.OpenFile(backing, os.O_RDWR|unix.O_CLOEXEC|unix.O_DIRECT, 0)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dmtest: %w", err)
	}
	defer b.Close()
	cfg := unix.LoopConfig{Fd: uint32(b.Fd())}
	cfg.Info.Flags = unix.LO_FLAGS_PARTSCAN | unix.LO_FLAGS_DIRECT_IO
	copy(cfg.Info.File_name[:], backing)
	if err := unix.IoctlLoopConfigure(int(f.Fd()), &cfg); err != nil {
		f.Close()
		return nil, fmt.Errorf("dmtest: LOOP_CONFIGURE %s over %s: %w", path, backing, err)
	}
	return &Loop{Path: path, f: f}, nil
}

// Detach detaches the loop device (the kernel finishes it once the last
// opener closes).
func (l *Loop) Detach() error {
	err := unix.IoctlSetInt(int(l.f.Fd()), unix.LOOP_CLR_FD, 0)
	return errors.Join(err, l.f.Close())
}
