package blockdev

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/ironic-go/ironic-agent/internal/clock"
	"github.com/ironic-go/ironic-agent/internal/ioctl"
	"golang.org/x/sys/unix"
)

// Device is an open block device with the geometry the erase, partition
// and config drive code needs. It is opened O_DIRECT so zeroes and
// overwrite passes reach the medium rather than the page cache; I/O on
// File must use AlignedBuffer.
type Device struct {
	Path string
	File *os.File
	// Size in bytes (BLKGETSIZE64), logical sector size (BLKSSZGET).
	Size       int64
	SectorSize int
}

// Open opens path for writing after the guard allows it.
func Open(g *Guard, path string) (*Device, error) {
	if err := g.Check(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_DIRECT|unix.O_EXCL, 0)
	if errors.Is(err, unix.EBUSY) && IsMultipathMap(path) {
		// Its partition maps hold a multipath map; the whole map is being
		// rewritten, so they go (RereadPartitions makes them again), unless
		// one is in use.
		if derr := DropPartitionMaps(context.Background(), path); derr != nil {
			return nil, fmt.Errorf("open %s: %w", path, derr)
		}
		f, err = os.OpenFile(path, os.O_RDWR|unix.O_DIRECT|unix.O_EXCL, 0)
	}
	if err != nil {
		// O_EXCL on a block device fails with EBUSY when the kernel holds
		// it (mounted, a partition mounted, md/dm member): one more guard.
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	d := &Device{Path: path, File: f}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.Mode()&os.ModeDevice == 0 {
		// A regular file explicitly allowed by the guard (tests, images).
		d.Size, d.SectorSize = fi.Size(), 512
		return d, nil
	}
	size, err := IoctlGetUint64(f, unix.BLKGETSIZE64)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("BLKGETSIZE64 %s: %w", path, err)
	}
	d.Size = int64(size)
	ss, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKSSZGET)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("BLKSSZGET %s: %w", path, err)
	}
	d.SectorSize = ss
	return d, nil
}

// Close closes the device.
func (d *Device) Close() error { return d.File.Close() }

// IsBlock tells a block device from a regular file the guard allowed.
func (d *Device) IsBlock() bool {
	fi, err := d.File.Stat()
	return err == nil && fi.Mode()&os.ModeDevice != 0
}

// IoctlGetUint64 runs an ioctl that reads a uint64, such as BLKGETSIZE64,
// on f.
func IoctlGetUint64(f *os.File, req uint) (uint64, error) {
	var v uint64
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(req), uintptr(unsafe.Pointer(&v)))
	if errno != 0 {
		return 0, errno
	}
	return v, nil
}

// IoctlRange issues a range ioctl (BLKDISCARD, BLKSECDISCARD, BLKZEROOUT),
// which takes {offset, length} in bytes.
func IoctlRange(f *os.File, req uint, off, length uint64) error {
	r := [2]uint64{off, length}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(req), uintptr(unsafe.Pointer(&r)))
	if errno != 0 {
		return errno
	}
	return nil
}

// RereadPartitionsOnce asks the kernel once to re-read f's partition
// table (BLKRRPART), without RereadPartitions' retries and multipath
// handling; a regular file (a disk image) has none to re-read. The error
// wraps the errno, so a busy disk is errors.Is(err, unix.EBUSY).
func RereadPartitionsOnce(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeDevice == 0 {
		return nil
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(unix.BLKRRPART), 0); errno != 0 {
		return fmt.Errorf("the kernel kept the old partition table of %s (BLKRRPART: %w)", f.Name(), errno)
	}
	return nil
}

// RereadPartitions asks the kernel to re-read the partition table. EBUSY
// (a partition still open) is retried briefly; EINVAL means the device
// does not carry partitions (a loop device without partscan, a
// partition), which is not an error, except on a multipath map, whose
// partition maps are made again from its table instead (kpartx's work).
func RereadPartitions(ctx context.Context, f *os.File) error {
	var err error
	for i := 0; i < 10; i++ {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(unix.BLKRRPART), 0)
		if errno == unix.EINVAL {
			if sys, err := SysBlockDir("/", f.Name()); err == nil {
				if name, uuid, ok := multipathMap(sys); ok {
					return syncPartitionMaps(ctx, f.Name(), sys, name, uuid)
				}
			}
			return nil
		}
		if errno == 0 {
			return nil
		}
		err = errno
		if errno != unix.EBUSY {
			break
		}
		if clock.Sleep(ctx, 200*time.Millisecond) != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("BLKRRPART %s: %w", f.Name(), err)
}

// AlignedBuffer returns a page-aligned buffer of n bytes, as O_DIRECT
// needs; it is memory-mapped so its alignment does not depend on the Go
// allocator. The returned function releases it.
func AlignedBuffer(n int) ([]byte, func(), error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("allocate %d-byte I/O buffer: %w", n, err)
	}
	return b, func() { _ = unix.Munmap(b) }, nil
}

// SysBlockDir returns /sys/class/block/<name> for a /dev path (symlinks
// resolved), the directory the kernel publishes a device's attributes in.
func SysBlockDir(root, dev string) (string, error) {
	resolved, err := filepath.EvalSymlinks(dev)
	if err != nil {
		if root == "/" {
			return "", err
		}
		// A fake root (tests) has no /dev; the kernel name is the base.
		resolved = dev
	}
	return filepath.Join(root, "sys/class/block", filepath.Base(resolved)), nil
}

// ReadSysInt reads one integer sysfs attribute.
func ReadSysInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// IsPartition reports whether the sysfs directory is a partition.
func IsPartition(sysDir string) bool {
	_, err := os.Stat(filepath.Join(sysDir, "partition"))
	return err == nil
}

// QueueDir returns the request-queue attributes of a device; partitions
// share their disk's queue.
func QueueDir(sysDir string) string {
	if IsPartition(sysDir) {
		return filepath.Join(filepath.Dir(ResolveLink(sysDir)), "queue")
	}
	return filepath.Join(sysDir, "queue")
}

// ResolveLink follows the symbolic links of p, or returns p when it cannot.
func ResolveLink(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// PartitionsOf lists the partition device paths of a whole disk from
// sysfs, in name order.
func PartitionsOf(root, dev string) []string {
	dir, err := SysBlockDir(root, dev)
	if err != nil {
		return nil
	}
	dir = ResolveLink(dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if IsPartition(filepath.Join(dir, e.Name())) {
			out = append(out, "/dev/"+e.Name())
		}
	}
	return out
}

// ErrNotSupported is a device that cannot do what was asked (an ioctl it
// does not implement); callers fall back to another method.
var ErrNotSupported = errors.New("not supported by the device")

// blkpgPartition is struct blkpg_partition of <linux/blkpg.h>.
type blkpgPartition struct {
	start   int64
	length  int64
	pno     int32
	devname [64]byte
	volname [64]byte
	_       [4]byte // pad to the C struct's 8-byte alignment
}

// blkpgIoctlArg is struct blkpg_ioctl_arg.
type blkpgIoctlArg struct {
	op      int32
	flags   int32
	datalen int32
	_       [4]byte
	data    uintptr
}

const (
	blkpgAddPartition = 1
	blkpgDelPartition = 2
)

// ioctlBLKPG is BLKPG, _IO(0x12, 105) of linux/blkpg.h, in the
// architecture's encoding (internal/ioctl: 0x20001269 on powerpc).
func ioctlBLKPG() uintptr { return uintptr(ioctl.IO(0x12, 105)) }

// EnsurePartition makes the kernel know partition pno of the disk open as
// f, adding it with BLKPG when a re-read did not (kernels built without a
// parser for the table type, or a re-read refused because a partition is
// in use). start and length are in bytes.
func EnsurePartition(f *os.File, sysDir string, partName string, pno int, start, length int64) error {
	if name, uuid, ok := multipathMap(sysDir); ok {
		return ensurePartitionMap(sysDir, name, uuid, pno, start, length)
	}
	if _, err := os.Stat(filepath.Join(sysDir, partName)); err == nil {
		return nil
	}
	p := blkpgPartition{start: start, length: length, pno: int32(pno)}
	arg := blkpgIoctlArg{op: blkpgAddPartition, datalen: int32(unsafe.Sizeof(p)), data: uintptr(unsafe.Pointer(&p))}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), ioctlBLKPG(), uintptr(unsafe.Pointer(&arg)))
	if errno != 0 && errno != unix.EBUSY {
		return fmt.Errorf("BLKPG add partition %d of %s: %w", pno, f.Name(), errno)
	}
	return nil
}

// RemovePartition makes the kernel forget partition pno of the disk open
// as f (BLKPG), for a table rewritten while other partitions of the disk
// stay in use, when a whole re-read is refused. A partition the kernel
// does not know (ENXIO) is already gone.
func RemovePartition(f *os.File, pno int) error {
	if sys, err := SysBlockDir("/", f.Name()); err == nil {
		if name, uuid, ok := multipathMap(sys); ok {
			return removePartitionMap(sys, name, uuid, pno)
		}
	}
	p := blkpgPartition{pno: int32(pno)}
	arg := blkpgIoctlArg{op: blkpgDelPartition, datalen: int32(unsafe.Sizeof(p)), data: uintptr(unsafe.Pointer(&p))}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), ioctlBLKPG(), uintptr(unsafe.Pointer(&arg)))
	if errno != 0 && errno != unix.ENXIO {
		return fmt.Errorf("BLKPG delete partition %d of %s: %w", pno, f.Name(), errno)
	}
	return nil
}
