package devmapper

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/clock"
)

// ControlPath is the device-mapper control node; MapperDir holds it and
// the /dev/mapper/NAME links Create makes.
const (
	ControlPath = "/dev/mapper/control"
	MapperDir   = "/dev/mapper"
)

func isSymlink(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode()&os.ModeSymlink != 0
}

// Control is an open /dev/mapper/control.
type Control struct {
	f *os.File
}

// Open opens the control node and asks the kernel for its DM version: an
// error says device-mapper cannot be used here (no dm_mod, a sandbox
// without it) and why.
func Open() (*Control, error) {
	f, err := os.OpenFile(ControlPath, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("devmapper: opening %s: %w", ControlPath, err)
	}
	c := &Control{f: f}
	if _, err := c.Version(); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// Close closes the control node; the devices stay.
func (c *Control) Close() error { return c.f.Close() }

func (c *Control) ioctl(nr uint32, b []byte, what string) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, c.f.Fd(), uintptr(ioctlNumber(nr)), uintptr(unsafe.Pointer(&b[0])))
	if e != 0 {
		return fmt.Errorf("devmapper: %s: %w", what, e)
	}
	return nil
}

// Version returns the kernel's DM ioctl version, "4.47.0".
func (c *Control) Version() (string, error) {
	b, err := header("", 0, ioctlSize)
	if err != nil {
		return "", err
	}
	if err := c.ioctl(cmdVersion, b, "DM_VERSION"); err != nil {
		return "", err
	}
	le := binary.LittleEndian
	return fmt.Sprintf("%d.%d.%d", le.Uint32(b[0:]), le.Uint32(b[4:]), le.Uint32(b[8:])), nil
}

// Device is a device-mapper device this package created.
type Device struct {
	Name string
	Path string // /dev/dm-N
	c    *Control
}

// Create makes the device name (with uuid, which may be empty) with table
// live (create, load, resume), waits for its /dev/dm-N node and links
// /dev/mapper/NAME to it.
func (c *Control) Create(ctx context.Context, name, uuid string, table []Target) (*Device, error) {
	b, err := createHeader(name, uuid)
	if err != nil {
		return nil, err
	}
	if err := c.ioctl(cmdDevCreate, b, "DM_DEV_CREATE "+name); err != nil {
		return nil, err
	}
	_, minor := decodeDev(binary.LittleEndian.Uint64(b[40:]))
	d := &Device{Name: name, Path: fmt.Sprintf("/dev/dm-%d", minor), c: c}
	if err := d.Load(ctx, table); err != nil {
		return nil, errors.Join(err, d.Remove(ctx))
	}
	for {
		if _, err := os.Stat(d.Path); err == nil {
			// As libdevmapper does where no udev makes the names: the
			// kpartx-style partition paths of a multipath map are found
			// by name.
			link := filepath.Join(MapperDir, name)
			_ = os.Remove(link)
			if err := os.Symlink("../"+filepath.Base(d.Path), link); err != nil {
				return nil, errors.Join(fmt.Errorf("devmapper: %w", err), d.Remove(context.Background()))
			}
			return d, nil
		}
		if clock.Sleep(ctx, 20*time.Millisecond) != nil {
			return nil, errors.Join(fmt.Errorf("devmapper: waiting for %s: %w", d.Path, ctx.Err()), d.Remove(context.Background()))
		}
	}
}

// Load replaces the device's table: load it as the inactive table,
// suspend (without flushing, so I/O in flight meets the new table), and
// resume, which makes it live.
func (d *Device) Load(ctx context.Context, table []Target) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := tableLoad(d.Name, table)
	if err != nil {
		return err
	}
	if err := d.c.ioctl(cmdTableLoad, b, "DM_TABLE_LOAD "+d.Name); err != nil {
		return err
	}
	if err := d.Suspend(); err != nil {
		return err
	}
	return d.Resume()
}

// Suspend stops the device without flushing: I/O in flight and every
// new request wait until Resume (a disk that stops answering).
func (d *Device) Suspend() error {
	b, err := header(d.Name, flagSuspend|flagNoFlush, ioctlSize)
	if err != nil {
		return err
	}
	return d.c.ioctl(cmdSuspend, b, "DM_DEV_SUSPEND (suspend) "+d.Name)
}

// Resume restarts a suspended device, with its loaded table if one was
// loaded since.
func (d *Device) Resume() error {
	b, err := header(d.Name, 0, ioctlSize)
	if err != nil {
		return err
	}
	return d.c.ioctl(cmdSuspend, b, "DM_DEV_SUSPEND (resume) "+d.Name)
}

// Load replaces the table of the device name (made by this package or
// another process), as Device.Load.
func (c *Control) Load(ctx context.Context, name string, table []Target) error {
	return (&Device{Name: name, c: c}).Load(ctx, table)
}

// Status returns the live table's targets of the device name with each
// target's status text in Params (DM_TABLE_STATUS; dmsetup status), or
// with its table line when table is true (dmsetup table).
func (c *Control) Status(name string, table bool) ([]Target, error) {
	var flags uint32
	what := "DM_TABLE_STATUS " + name
	if table {
		flags, what = flagStatusTable, what+" (table)"
	}
	for size := 16 << 10; ; size *= 4 {
		b, err := header(name, flags, size)
		if err != nil {
			return nil, err
		}
		if err := c.ioctl(cmdTableStatus, b, what); err != nil {
			return nil, err
		}
		if binary.LittleEndian.Uint32(b[28:])&flagBufferFull != 0 {
			if size >= 4<<20 {
				return nil, fmt.Errorf("devmapper: %s: the answer does not fit %d bytes", what, size)
			}
			continue
		}
		return parseTargets(b)
	}
}

// Message sends msg to the first target of the device name
// (DM_TARGET_MSG; dmsetup message NAME 0 MSG): "fail_path 8:16",
// "reinstate_path 8:16" to a multipath map.
func (c *Control) Message(name, msg string) error {
	b, err := messageBuffer(name, msg)
	if err != nil {
		return err
	}
	return c.ioctl(cmdTargetMsg, b, fmt.Sprintf("DM_TARGET_MSG %s %q", name, msg))
}

// Remove removes the device, retrying while something still holds it
// open (EBUSY) until ctx ends.
func (d *Device) Remove(ctx context.Context) error { return d.c.Remove(ctx, d.Name) }

// Remove removes the device name and its /dev/mapper link, retrying
// while something still holds it open (EBUSY) until ctx ends.
func (c *Control) Remove(ctx context.Context, name string) error {
	for {
		b, err := header(name, 0, ioctlSize)
		if err != nil {
			return err
		}
		err = c.ioctl(cmdDevRemove, b, "DM_DEV_REMOVE "+name)
		if err == nil {
			if link := filepath.Join(MapperDir, name); isSymlink(link) {
				_ = os.Remove(link)
			}
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return err
		}
		if clock.Sleep(ctx, 100*time.Millisecond) != nil {
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		}
	}
}
