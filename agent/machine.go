package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Machine is what the agent does to the machine itself: power off, reboot,
// flush, set the clocks. It is an interface so tests inject a fake and
// never power off, or change the clock of, the host they run on.
type Machine interface {
	// PowerOff syncs and powers the machine off.
	PowerOff() error
	// Reboot syncs and reboots.
	Reboot() error
	// Sync flushes filesystem buffers and drops the page cache.
	Sync() error
	// FlushBlockDevice drops a block device's buffer cache (BLKFLSBUF).
	FlushBlockDevice(dev string) error
	// StepClock moves the system clock (CLOCK_REALTIME) by offset.
	StepClock(offset time.Duration) error
	// WriteRTC sets the hardware clock from the system clock, in UTC
	// (hwclock --systohc).
	WriteRTC(ctx context.Context) error
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

// FlushBlockDevice implements Machine with the BLKFLSBUF ioctl (what
// blockdev --flushbufs does). The device is opened read-only: flushing
// writes nothing to it.
func (HostMachine) FlushBlockDevice(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("flush %s: %w", dev, err)
	}
	defer f.Close()
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), unix.BLKFLSBUF, 0); e != 0 {
		return fmt.Errorf("flush %s: ioctl BLKFLSBUF: %w", dev, e)
	}
	return nil
}

// StepClock implements Machine with clock_settime(CLOCK_REALTIME). The new
// time is read and written in one call, so the time spent between the
// measurement and here is not lost. Needs CAP_SYS_TIME.
func (HostMachine) StepClock(offset time.Duration) error {
	ts := unix.NsecToTimespec(time.Now().Add(offset).UnixNano())
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		return fmt.Errorf("clock_settime(CLOCK_REALTIME) by %v: %w", offset, err)
	}
	return nil
}

// WriteRTC implements Machine with the RTC_SET_TIME ioctl, what hwclock
// --systohc ends in. The RTC counts whole seconds, so it is set at the
// start of a second (hwclock waits the same way). UTC, as hwclock without
// an /etc/adjtime saying LOCAL: the ramdisk has none.
func (HostMachine) WriteRTC(ctx context.Context) error {
	var f *os.File
	var err error
	// Where hwclock looks for the RTC, in its order.
	for _, dev := range []string{"/dev/rtc0", "/dev/rtc", "/dev/misc/rtc"} {
		if f, err = os.OpenFile(dev, os.O_RDONLY|syscall.O_CLOEXEC, 0); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("hardware clock: %w", err)
	}
	defer f.Close()
	now := time.Now()
	next := now.Truncate(time.Second).Add(time.Second)
	t := time.NewTimer(next.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	u := next.UTC()
	rt := unix.RTCTime{Sec: int32(u.Second()), Min: int32(u.Minute()), Hour: int32(u.Hour()),
		Mday: int32(u.Day()), Mon: int32(u.Month()) - 1, Year: int32(u.Year()) - 1900, Isdst: 0}
	if err := unix.IoctlSetRTCTime(int(f.Fd()), &rt); err != nil {
		return fmt.Errorf("hardware clock %s: ioctl RTC_SET_TIME %s: %w", f.Name(), u.Format(time.RFC3339), err)
	}
	return nil
}

// peakRSS is the peak resident memory, in KiB, of the agent process so far
// (getrusage's ru_maxrss: the kernel's VmHWM of the process) and of the
// largest program it ran and waited for; -1 when getrusage fails. Logged as
// the machine goes down, it is the agent's own high-water mark of a whole
// inspection, cleaning or deploy (docs/testing.md: IPA side by side).
func peakRSS() (self, children int64) {
	get := func(who int) int64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			return -1
		}
		return ru.Maxrss
	}
	return get(syscall.RUSAGE_SELF), get(syscall.RUSAGE_CHILDREN)
}
