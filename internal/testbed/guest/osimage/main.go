// Command osimage is /init of the operating system internal/testbed/osimage builds:
// the deployed OS of the VM tests. As PID 1 it prints osimage's marker
// lines on the console, loads the disk and file system drivers listed in
// the initramfs, finds the config drive (the partition or disk whose file
// system, ISO 9660 or FAT, is labelled config-2), prints the hostname of
// its openstack/latest/meta_data.json and its user_data, and powers the
// machine off. It has no shell and reads nothing else: what it prints is
// all a test needs to know that the disk booted and what Ironic passed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The marker lines; internal/testbed/osimage matches them (its constants of the
// same names must stay equal to these).
const (
	markBooted   = "osimage: the deployed OS booted"
	markDrive    = "osimage: config drive "
	markHostname = "osimage: hostname "
	markUserData = "osimage: user-data "
	markFailed   = "osimage: failed: "
	markOff      = "osimage: powering off"
	markSecure   = "osimage: secure boot "
)

// secureBootVar is the UEFI global variable SecureBoot in efivarfs: four
// bytes of attributes, then 1 when the firmware enforces Secure Boot.
const secureBootVar = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

// moduleList names, one a line and dependencies first, the modules below
// /lib/modules to load.
const moduleList = "/lib/modules/list"

// configDriveWait bounds the search for the config drive: the disk
// drivers probe in the background after their modules load.
const configDriveWait = 60 * time.Second

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "guest: the deployed OS's /init; it mounts, loads modules and powers off, so it runs only as PID 1")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*configDriveWait)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Println(markFailed + err.Error())
	}
	fmt.Println(markOff)
	powerOff()
}

func run(ctx context.Context, console io.Writer) error {
	for _, m := range []struct{ fs, dir string }{{"proc", "/proc"}, {"sysfs", "/sys"}, {"devtmpfs", "/dev"}} {
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.fs, m.dir, m.fs, 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s on %s: %w", m.fs, m.dir, err)
		}
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	cmdline, _ := os.ReadFile("/proc/cmdline")
	fmt.Fprintf(console, "%s: kernel %s, command line %q\n", markBooted, unix.ByteSliceToString(uts.Release[:]), strings.TrimSpace(string(cmdline)))
	if err := loadModules(moduleList); err != nil {
		return err
	}
	fmt.Fprintf(console, "%s%s, lockdown %s\n", markSecure, secureBoot(), lockdown())
	dev, fstype, err := findConfigDrive(ctx, "/sys/class/block", "/dev")
	if err != nil {
		return err
	}
	fmt.Fprintf(console, "%s%s (%s)\n", markDrive, dev, fstype)
	const mnt = "/mnt/config"
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(dev, mnt, fstype, unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("mount %s (%s) on %s: %w", dev, fstype, mnt, err)
	}
	defer func() { _ = unix.Unmount(mnt, 0) }()
	meta, err := os.ReadFile(filepath.Join(mnt, "openstack/latest/meta_data.json"))
	if err != nil {
		return fmt.Errorf("config drive %s: %w", dev, err)
	}
	var md struct {
		Hostname string `json:"hostname"`
	}
	if err := json.Unmarshal(meta, &md); err != nil {
		return fmt.Errorf("config drive %s: openstack/latest/meta_data.json: %w", dev, err)
	}
	fmt.Fprintf(console, "%s%q\n", markHostname, md.Hostname)
	ud, err := os.ReadFile(filepath.Join(mnt, "openstack/latest/user_data"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(console, "%s(none)\n", markUserData)
	case err != nil:
		return fmt.Errorf("config drive %s: %w", dev, err)
	default:
		fmt.Fprintf(console, "%s%q\n", markUserData, ud)
	}
	return nil
}

// loadModules loads each module the list names, in order. A module the
// kernel already has is no error.
func loadModules(list string) error {
	b, err := os.ReadFile(list)
	if err != nil {
		return fmt.Errorf("module list: %w", err)
	}
	for name := range strings.FieldsSeq(string(b)) {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(list), name))
		if err != nil {
			return fmt.Errorf("module %s: %w", name, err)
		}
		if err := unix.InitModule(data, ""); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("init_module %s: %w", name, err)
		}
	}
	return nil
}

// secureBoot says what the firmware's SecureBoot variable says: enabled,
// disabled, "no UEFI" (a BIOS boot), or why it could not be read.
func secureBoot() string {
	const efivars = "/sys/firmware/efi/efivars"
	if _, err := os.Stat("/sys/firmware/efi"); err != nil {
		return "no UEFI"
	}
	if err := unix.Mount("efivarfs", efivars, "efivarfs", unix.MS_RDONLY, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Sprintf("unknown (mount efivarfs: %v)", err)
	}
	defer func() { _ = unix.Unmount(efivars, 0) }()
	b, err := os.ReadFile(secureBootVar)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "disabled (no SecureBoot variable)"
	case err != nil:
		return fmt.Sprintf("unknown (%v)", err)
	case len(b) == 5 && b[4] == 1:
		return "enabled"
	case len(b) == 5 && b[4] == 0:
		return "disabled"
	}
	return fmt.Sprintf("unknown (SecureBoot is %x)", b)
}

// lockdown is the kernel's lockdown mode, the bracketed word of
// securityfs's lockdown file ("none [integrity] confidentiality").
func lockdown() string {
	const security = "/sys/kernel/security"
	if err := unix.Mount("securityfs", security, "securityfs", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Sprintf("unknown (mount securityfs: %v)", err)
	}
	defer func() { _ = unix.Unmount(security, 0) }()
	b, err := os.ReadFile(security + "/lockdown")
	if err != nil {
		return fmt.Sprintf("unknown (%v)", err)
	}
	if _, rest, ok := strings.Cut(string(b), "["); ok {
		if mode, _, ok := strings.Cut(rest, "]"); ok {
			return mode
		}
	}
	return fmt.Sprintf("unknown (%q)", strings.TrimSpace(string(b)))
}

// findConfigDrive polls the block devices until one holds a file system
// labelled config-2 and returns its device node and file system type.
func findConfigDrive(ctx context.Context, sysBlock, devDir string) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, configDriveWait)
	defer cancel()
	var seen []string
	for {
		entries, err := os.ReadDir(sysBlock)
		if err != nil {
			return "", "", err
		}
		seen = seen[:0]
		for _, e := range entries {
			dev := filepath.Join(devDir, e.Name())
			seen = append(seen, e.Name())
			if fstype, ok := probeDevice(dev); ok {
				return dev, fstype, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("no file system labelled %s on the block devices %s after %s", configDriveLabel, strings.Join(seen, " "), configDriveWait)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// probeDevice reads the start of dev and reports the config drive's file
// system type if dev holds one.
func probeDevice(dev string) (string, bool) {
	f, err := os.Open(dev)
	if err != nil {
		return "", false
	}
	defer f.Close()
	buf := make([]byte, probeSize)
	n, _ := io.ReadFull(f, buf)
	return probe(buf[:n])
}

func powerOff() {
	unix.Sync()
	// tcdrain: the last lines reach the serial port before the power goes.
	_ = unix.IoctlSetInt(1, unix.TCSBRK, 1)
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	// Only if the kernel refused: PID 1 must not exit.
	for {
		time.Sleep(time.Hour)
	}
}
