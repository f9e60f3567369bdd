// Command modprobe (modguest in its output) is the /init of the ramdisk
// TestKernelAsksForModules (e2e/ramdisk/modules) boots: the agent
// ramdisk's init as PID 1, which points the kernel's module helper at
// /usr/bin/modprobe (a link to this binary, which then is rdinit.Modprobe)
// and runs "modguest check" as its command. That makes the kernel ask for
// modules the manifest marks ondemand, as the agent's work does: a mount
// of each partition-image file system (fs-ext4, fs-xfs, fs-btrfs) and a
// device-mapper table of the zero target (dm-zero). It prints for each
// "modguest: ok NAME before=false" (not loaded at boot, loaded when asked
// for) or "modguest: fail NAME WHY", and for a name no module answers
// whether modprobe said so.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/devmapper"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
)

func main() {
	if filepath.Base(os.Args[0]) == rdinit.ModprobeName {
		os.Exit(rdinit.Modprobe(os.Args[1:], os.Stderr))
	}
	if os.Getpid() == 1 {
		err := rdinit.Main(context.Background(), os.Stdout, nil)
		fmt.Println("modguest init:", err)
		_ = rdinit.Halt(false)
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "check" {
		fmt.Fprintln(os.Stderr, "usage: modguest check (in the test's ramdisk)")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := os.MkdirAll("/mnt/modguest", 0o755); err != nil {
		fmt.Println("modguest: fail mkdir", err)
	}
	for _, fs := range []string{"ext4", "xfs", "btrfs"} {
		before := loaded(fs)
		// The kernel looks the file system type up (and asks for
		// fs-<type>) before it looks at the source, which is not there.
		err := unix.Mount("/dev/modguest-none", "/mnt/modguest", fs, unix.MS_RDONLY, "")
		report(fs, before, err)
	}
	before := loaded("dm_zero")
	report("dm_zero", before, dmZero(ctx))
	// A name no module answers: status 1, and a message without -q.
	out, err := exec.CommandContext(ctx, rdinit.ModprobePath, "fs-modguest-none").CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 && strings.Contains(string(out), "fs-modguest-none") {
		fmt.Println("modguest: ok unknown", strings.Join(strings.Fields(string(out)), " "))
	} else {
		fmt.Printf("modguest: fail unknown status %v output %q\n", err, out)
	}
	fmt.Println("modguest: done")
}

// loaded says whether module name is in the kernel.
func loaded(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/module", name))
	return err == nil
}

func report(name string, before bool, err error) {
	switch {
	case !loaded(name):
		fmt.Printf("modguest: fail %s not loaded after the request (%v)\n", name, err)
	default:
		fmt.Printf("modguest: ok %s before=%v\n", name, before)
	}
}

// dmZero creates and removes a device of the zero target.
func dmZero(ctx context.Context) error {
	c, err := devmapper.Open()
	if err != nil {
		return err
	}
	defer c.Close()
	d, err := c.Create(ctx, "modguest-zero", "", []devmapper.Target{{Start: 0, Length: 8, Type: "zero"}})
	if err != nil {
		return err
	}
	return d.Remove(ctx)
}
