package nvme

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"github.com/ironic-go/ironic-agent/internal/ioctl"
	"golang.org/x/sys/unix"
)

// The ioctls of include/uapi/linux/nvme_ioctl.h, in the architecture's
// encoding (internal/ioctl).
func ioctlID() uintptr { return uintptr(ioctl.IO('N', 0x40)) }

// ioctlAdminCmd is _IOWR('N', 0x41, struct nvme_admin_cmd).
func ioctlAdminCmd() uintptr { return uintptr(ioctl.IOWR('N', 0x41, CommandSize)) }

// File is an open NVMe controller or namespace device.
type File struct {
	f *os.File
}

// Open opens path (/dev/nvmeN or /dev/nvmeNnM) for admin commands. The
// kernel wants CAP_SYS_ADMIN for them; a read-only open is what nvme-cli
// does too.
func Open(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("nvme: %w", err)
	}
	return &File{f: f}, nil
}

// Close closes the device.
func (f *File) Close() error { return f.f.Close() }

// Name is the path it was opened as.
func (f *File) Name() string { return f.f.Name() }

// Admin sends cmd through NVME_IOCTL_ADMIN_CMD.
func (f *File) Admin(cmd *Command, data []byte) error {
	var addr uint64
	if len(data) > 0 {
		addr = uint64(uintptr(unsafe.Pointer(&data[0])))
	}
	b := cmd.Marshal(addr)
	conn, err := f.f.SyscallConn()
	if err != nil {
		return fmt.Errorf("%s on %s: %w", cmd.String(), f.f.Name(), err)
	}
	var r1 uintptr
	var errno unix.Errno
	cerr := conn.Control(func(fd uintptr) {
		r1, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, ioctlAdminCmd(), uintptr(unsafe.Pointer(&b[0])))
	})
	runtime.KeepAlive(data)
	if cerr != nil {
		return fmt.Errorf("%s on %s: %w", cmd.String(), f.f.Name(), cerr)
	}
	if errno != 0 {
		return fmt.Errorf("%s on %s: NVME_IOCTL_ADMIN_CMD: %w", cmd.String(), f.f.Name(), errno)
	}
	done, _ := UnmarshalCommand(zeroAddr(b))
	cmd.Result = done.Result
	if r1 != 0 {
		return &StatusError{Command: cmd.String() + " on " + f.f.Name(), Status: uint16(r1)}
	}
	return nil
}

// zeroAddr clears the data pointer of a marshalled command.
func zeroAddr(b [CommandSize]byte) []byte {
	clear(b[24:32])
	return b[:]
}

// NamespaceID asks a namespace block device for its namespace ID.
func (f *File) NamespaceID() (uint32, error) {
	conn, err := f.f.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("NVME_IOCTL_ID on %s: %w", f.f.Name(), err)
	}
	var r1 uintptr
	var errno unix.Errno
	if err := conn.Control(func(fd uintptr) {
		r1, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, ioctlID(), 0)
	}); err != nil {
		return 0, fmt.Errorf("NVME_IOCTL_ID on %s: %w", f.f.Name(), err)
	}
	if errno != 0 {
		return 0, fmt.Errorf("NVME_IOCTL_ID on %s (not a namespace device?): %w", f.f.Name(), errno)
	}
	return uint32(r1), nil
}
