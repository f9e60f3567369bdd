// Command firmware (fwguest in its output) is the /init of the ramdisk
// TestFirmwareLoads (e2e/ramdisk/modules) boots: the agent ramdisk's init
// as PID 1, which runs "fwguest check NAME..." as its command (the names,
// one a line, in /etc/fwguest-names without NAME arguments, since the
// kernel command line is too short for them). That loads the kernel's
// test_firmware module (an extra file of the ramdisk,
// /lib/modules/test_firmware.ko) and asks the kernel's own firmware loader
// for each NAME through it, as a driver would (request_firmware), printing
// for each "fwguest: ok NAME SIZE SHA256" or "fwguest: fail NAME ERROR
// SECONDS".
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"golang.org/x/sys/unix"
)

const (
	module  = "/lib/modules/test_firmware.ko"
	trigger = "/sys/devices/virtual/misc/test_firmware/trigger_request"
	device  = "/dev/test_firmware"
)

func main() {
	if os.Getpid() == 1 {
		err := rdinit.Main(context.Background(), os.Stdout, nil)
		fmt.Println("fwguest init:", err)
		_ = rdinit.Halt(false)
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "check" {
		fmt.Fprintln(os.Stderr, "usage: fwguest check NAME... (in the test's ramdisk)")
		os.Exit(2)
	}
	// The kernel's messages (test_firmware's, the firmware loader's) share
	// the serial console with these result lines and can land in the
	// middle of one, which the test then cannot read: only errors reach
	// the console from here on. This is the guest's printk setting.
	_ = os.WriteFile("/proc/sys/kernel/printk", []byte("3"), 0)
	if err := loadModule(); err != nil {
		fmt.Println("fwguest: load", module+":", err)
		os.Exit(1)
	}
	names := os.Args[2:]
	if len(names) == 0 {
		b, err := os.ReadFile("/etc/fwguest-names")
		if err != nil {
			fmt.Println("fwguest:", err)
			os.Exit(1)
		}
		names = strings.Fields(string(b))
	}
	for _, name := range names {
		t := time.Now()
		data, err := request(name)
		if err != nil {
			fmt.Printf("fwguest: fail %s %v %.3f\n", name, err, time.Since(t).Seconds())
			continue
		}
		sum := sha256.Sum256(data)
		fmt.Printf("fwguest: ok %s %d %s\n", name, len(data), hex.EncodeToString(sum[:]))
	}
	fmt.Println("fwguest: done")
}

func loadModule() error {
	f, err := os.Open(module)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	return nil
}

// request makes test_firmware call request_firmware(name) and returns
// what the kernel loaded (test_firmware's device reads it back).
func request(name string) ([]byte, error) {
	t, err := os.OpenFile(trigger, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = t.WriteString(name)
	t.Close()
	if err != nil {
		return nil, err
	}
	d, err := os.Open(device)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return io.ReadAll(d)
}
