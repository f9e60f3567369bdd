package agent

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Machine is what the agent does to the machine itself: power off, reboot,
// flush. It is an interface so tests inject a fake and never power off the
// host they run on.
type Machine interface {
	// PowerOff syncs and powers the machine off.
	PowerOff() error
	// Reboot syncs and reboots.
	Reboot() error
	// Sync flushes filesystem buffers and drops the page cache.
	Sync() error
	// FlushBlockDevice drops a block device's buffer cache (BLKFLSBUF).
	FlushBlockDevice(dev string) error
}

// HostMachine acts on the running kernel with reboot(2), sync(2) and
// ioctls. It needs root (CAP_SYS_BOOT for power actions).
type HostMachine struct{}

// PowerOff implements Machine with reboot(LINUX_REBOOT_CMD_POWER_OFF) after
// sync, the syscall the poweroff command ends in (the ramdisk has no init
// system to ask).
func (HostMachine) PowerOff() error {
	syscall.Sync()
	if err := syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		return fmt.Errorf("reboot(2) POWER_OFF: %w", err)
	}
	return nil
}

// Reboot implements Machine with reboot(LINUX_REBOOT_CMD_RESTART).
func (HostMachine) Reboot() error {
	syscall.Sync()
	if err := syscall.Reboot(syscall.LINUX_REBOOT_CMD_RESTART); err != nil {
		return fmt.Errorf("reboot(2) RESTART: %w", err)
	}
	return nil
}

// Sync implements Machine: sync(2), then "3" into /proc/sys/vm/drop_caches
// as IPA's full_sync does.
func (HostMachine) Sync() error {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil && !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("dropping caches: %w", err)
	}
	return nil
}

// blkflsbuf is _IO(0x12, 97) from linux/fs.h.
const blkflsbuf = 0x1261

// FlushBlockDevice implements Machine with the BLKFLSBUF ioctl (what
// blockdev --flushbufs does). The device is opened read-only: flushing
// writes nothing to it.
func (HostMachine) FlushBlockDevice(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("flush %s: %w", dev, err)
	}
	defer f.Close()
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), blkflsbuf, 0); e != 0 {
		return fmt.Errorf("flush %s: ioctl BLKFLSBUF: %w", dev, e)
	}
	return nil
}
