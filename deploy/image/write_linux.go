package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"golang.org/x/sys/unix"
)

// alignedAlloc returns n bytes of page-aligned memory outside the Go heap:
// O_DIRECT needs aligned buffers, and memory the garbage collector does not
// see cannot push the heap goal (and so the peak RSS) up.
func alignedAlloc(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("allocating %d bytes of write buffers: %w", n, err)
	}
	return b, nil
}

func freeAligned(b []byte) {
	if b != nil {
		_ = unix.Munmap(b)
	}
}

// deviceFile is a block device (or, in tests and for operators, a regular
// file) opened for O_DIRECT writes, with a second buffered descriptor for
// the image's unaligned tail.
type deviceFile struct {
	path   string
	f      *os.File   // O_DIRECT
	tailMu sync.Mutex // the writer's workers run WriteAt concurrently
	tail   *os.File   // buffered, opened on demand
	block  bool
	size   int64
	direct bool
}

// openDevice opens path for writing. Block devices are opened O_EXCL so
// that a mounted filesystem or a device-mapper holder makes this fail
// instead of being overwritten underneath.
func openDevice(path string) (*deviceFile, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	d := &deviceFile{path: path, size: -1}
	flags := unix.O_WRONLY | unix.O_CLOEXEC
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		d.block = true
		flags |= unix.O_EXCL
	case unix.S_IFREG:
	default:
		return nil, fmt.Errorf("%s is neither a block device nor a regular file", path)
	}
	fd, err := unix.Open(path, flags|unix.O_DIRECT, 0)
	if errors.Is(err, unix.EBUSY) && d.block && blockdev.IsMultipathMap(path) {
		// A multipath map held by its partition maps: the whole map is
		// rewritten, so they go (unless one is in use).
		if derr := blockdev.DropPartitionMaps(context.Background(), path); derr != nil {
			return nil, fmt.Errorf("opening %s: %w", path, derr)
		}
		fd, err = unix.Open(path, flags|unix.O_DIRECT, 0)
	}
	if err == nil {
		d.direct = true
	} else if errors.Is(err, unix.EINVAL) {
		// Some filesystems (tmpfs) refuse O_DIRECT; buffered is correct, only slower.
		fd, err = unix.Open(path, flags, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s for writing: %w", path, err)
	}
	d.f = os.NewFile(uintptr(fd), path)
	if d.block {
		var size uint64
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, d.f.Fd(), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size))); e != 0 {
			d.f.Close()
			return nil, fmt.Errorf("reading the size of %s (BLKGETSIZE64): %w", path, e)
		}
		d.size = int64(size)
	}
	return d, nil
}

func (d *deviceFile) Size() int64 { return d.size }

func (d *deviceFile) WriteAt(p []byte, off int64) (int, error) {
	if !d.direct || (len(p)%directAlign == 0 && off%directAlign == 0) {
		return d.f.WriteAt(p, off)
	}
	// The image's last, unaligned bytes: the aligned part direct, the
	// rest through the page cache (fsync covers both).
	head := len(p) - len(p)%directAlign
	if off%directAlign != 0 {
		head = 0
	}
	n, err := d.f.WriteAt(p[:head], off)
	if err != nil {
		return n, err
	}
	d.tailMu.Lock()
	defer d.tailMu.Unlock()
	if d.tail == nil {
		f, err := os.OpenFile(d.path, os.O_WRONLY, 0)
		if err != nil {
			return n, err
		}
		d.tail = f
	}
	m, err := d.tail.WriteAt(p[head:], off+int64(head))
	return n + m, err
}

// ZeroRange zeroes with BLKZEROOUT on block devices (the device or kernel
// picks the fastest way: WRITE ZEROES, unmap, or plain writes) and with
// fallocate on files; writing zero buffers is the last resort.
func (d *deviceFile) ZeroRange(off, n int64) error {
	if d.block && off%512 == 0 && n%512 == 0 {
		r := [2]uint64{uint64(off), uint64(n)}
		_, _, e := unix.Syscall(unix.SYS_IOCTL, d.f.Fd(), unix.BLKZEROOUT, uintptr(unsafe.Pointer(&r)))
		if e == 0 {
			return nil
		}
		if e != unix.EOPNOTSUPP && e != unix.ENOTTY && e != unix.EINVAL {
			return fmt.Errorf("BLKZEROOUT: %w", e)
		}
	}
	if !d.block {
		if err := unix.Fallocate(int(d.f.Fd()), unix.FALLOC_FL_ZERO_RANGE, off, n); err == nil {
			return nil
		}
	}
	return d.writeZeros(off, n)
}

func (d *deviceFile) writeZeros(off, n int64) error {
	buf, err := alignedAlloc(zeroSegSize)
	if err != nil {
		return err
	}
	defer freeAligned(buf)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := d.WriteAt(buf[:k], off); err != nil {
			return err
		}
		off += k
		n -= k
	}
	return nil
}

// Finish makes the written bytes durable and asks the kernel to re-read
// the partition table so the image's partitions appear. A device that
// cannot have partitions (a loop device without partition scanning) is a
// warning, not a failure: the image is written and verified.
func (d *deviceFile) Finish(ctx context.Context) (string, error) {
	if d.tail != nil {
		if err := d.tail.Sync(); err != nil {
			return "", fmt.Errorf("fsync %s: %w", d.path, err)
		}
	}
	if err := d.f.Sync(); err != nil {
		return "", fmt.Errorf("fsync %s: %w", d.path, err)
	}
	if !d.block {
		return "", nil
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if sys, err := blockdev.SysBlockDir("/", d.path); err == nil && blockdev.IsPartition(blockdev.ResolveLink(sys)) {
		// A partition image's root partition: partitions hold no table.
		return "", nil
	}
	if blockdev.IsMultipathMap(d.path) {
		return d.multipathPartitions(ctx)
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, d.f.Fd(), unix.BLKRRPART, 0); e != 0 {
		return fmt.Sprintf("re-reading the partition table of %s (BLKRRPART) failed: %v", d.path, e), nil
	}
	return "", nil
}

// multipathPartitions makes the image's partitions appear on a multipath
// map, which the kernel does not partition: kpartx's partition maps. A
// map claims the device it maps exclusively, which this writer's O_EXCL
// open would refuse, so the writer closes the device first.
func (d *deviceFile) multipathPartitions(ctx context.Context) (string, error) {
	err := d.Close()
	d.f, d.tail = nil, nil
	if err != nil {
		return "", fmt.Errorf("close %s: %w", d.path, err)
	}
	f, err := os.Open(d.path)
	if err != nil {
		return fmt.Sprintf("making the partition maps of %s failed: %v", d.path, err), nil
	}
	defer f.Close()
	if err := blockdev.RereadPartitions(ctx, f); err != nil {
		return fmt.Sprintf("making the partition maps of %s failed: %v", d.path, err), nil
	}
	return "", nil
}

func (d *deviceFile) Close() error {
	var err error
	if d.tail != nil {
		err = d.tail.Close()
	}
	if d.f != nil {
		err = errors.Join(err, d.f.Close())
	}
	return err
}
