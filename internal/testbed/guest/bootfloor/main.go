// Command bootfloor is the /init of the kernel-boot floor (e2e/vm
// TestVMKernelBootFloor): the agent's ramdisk with this program laid over
// its /init, booted in the agent's VM shape. As PID 1 it prints one line,
//
//	bootfloor: ready uptime=<seconds since the kernel started>
//
// and powers the machine off. The time from QEMU's start to that line is
// what the kernel, the firmware and the initramfs's unpacking cost before
// any init runs: the floor under the agent's boot-to-heartbeat, measured
// the same way (the console line's arrival on the host).
package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/logging"
)

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "bootfloor: runs as a ramdisk's /init (PID 1) only; it powers the machine off")
		os.Exit(2)
	}
	var ts unix.Timespec
	up := "?"
	// CLOCK_BOOTTIME is /proc/uptime's clock; /proc is not mounted here.
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err == nil {
		up = logging.Seconds(time.Duration(ts.Nano()))
	}
	report(os.Stdout, up)
	unix.Sync()
	err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	// Reboot returns only on failure; PID 1 must not exit (the kernel
	// panics), so say why and wait for the test's timeout.
	fmt.Println("bootfloor: power off:", err)
	select {}
}

// report prints the ready line.
func report(w io.Writer, uptime string) {
	fmt.Fprintf(w, "bootfloor: ready uptime=%s\n", uptime)
}
