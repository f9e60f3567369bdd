// Command udev (udevguest) is the /init of the ramdisk tools/recordfixture -udev boots:
// the agent ramdisk's init (as PID 1), plus Debian bookworm's udevd (systemd
// 252, its rules and helpers, copied into the ramdisk by the recorder).
// "udevguest capture DIR" starts systemd-udevd, replays the kernel's add
// events (udevadm trigger) and waits for udevd to finish (udevadm settle),
// so /run/udev/data and /dev/disk/by-path are what udevd itself wrote, and
// then records the machine as `ironic-agent capture-fixture DIR` does.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/collector"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/version"
)

func main() {
	if os.Getpid() == 1 {
		err := rdinit.Main(context.Background(), os.Stdout, nil)
		fmt.Println("udevguest init:", err)
		_ = rdinit.Halt(false)
		return
	}
	if len(os.Args) != 3 || os.Args[1] != "capture" {
		fmt.Fprintln(os.Stderr, "usage: udevguest capture DIR (in the recorder's ramdisk)")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := capture(ctx, os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "udevguest:", err)
		os.Exit(1)
	}
}

// run executes a command, naming it, its exit status and stderr on failure.
func run(ctx context.Context, argv0, path string, args ...string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Args[0] = argv0
	out, err := cmd.CombinedOutput()
	fmt.Printf("udevguest: %s %s: %v\n%s", argv0, strings.Join(args, " "), err, out)
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", argv0, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func capture(ctx context.Context, dir string) error {
	// The ramdisk writer gives extra files mode 0644.
	for _, g := range []string{"/lib/udev/*_id", "/usr/bin/udevadm", "/lib64/*", "/lib/x86_64-linux-gnu/*"} {
		ms, _ := filepath.Glob(g)
		for _, m := range ms {
			_ = os.Chmod(m, 0o755)
		}
	}
	if err := os.MkdirAll("/run/udev", 0o755); err != nil {
		return err
	}
	// udevadm is systemd-udevd when called by that name (systemd 252
	// installs /lib/systemd/systemd-udevd as a link to it).
	if err := run(ctx, "systemd-udevd", "/usr/bin/udevadm", "--daemon", "--resolve-names=never"); err != nil {
		return err
	}
	for _, typ := range []string{"subsystems", "devices"} {
		if err := run(ctx, "udevadm", "/usr/bin/udevadm", "trigger", "--type="+typ, "--action=add"); err != nil {
			return err
		}
	}
	if err := run(ctx, "udevadm", "/usr/bin/udevadm", "settle", "--timeout=300"); err != nil {
		return err
	}
	_ = run(ctx, "udevadm", "/usr/bin/udevadm", "control", "--exit")
	for _, d := range []string{"/run/udev/data", "/dev/disk/by-path"} {
		es, _ := os.ReadDir(d)
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		fmt.Printf("udevguest: %s: %s\n", d, strings.Join(names, " "))
	}
	inv, err := collector.Capture(ctx, dir, collector.Options{Root: "/"})
	if inv == nil {
		return err
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "udevguest: warning: %v\n", err)
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	text := fmt.Sprintf("# Fixture %s\n\nRecorded with udevguest (collector.Capture, as `ironic-agent capture-fixture` %s) after systemd-udevd ran, kernel %s, %s/%s, at %s.\n",
		filepath.Base(filepath.Clean(dir)), version.Version(), strings.TrimSpace(string(kernel)), runtime.GOOS, runtime.GOARCH,
		time.Now().UTC().Format(time.RFC3339))
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(text), 0o644); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	fmt.Printf("udevguest: captured %d disks into %s\n", len(inv.Disks), dir)
	return nil
}
