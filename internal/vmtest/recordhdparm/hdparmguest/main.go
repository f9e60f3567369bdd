// Command hdparmguest is the /init of the ramdisk recordhdparm boots: the
// agent ramdisk's init (as PID 1), plus Debian's hdparm and the libraries it
// links. "hdparmguest hdparm DIR" writes, for every ATA disk of the machine
// (SCSI vendor "ATA" in sysfs), what `hdparm -I` and `hdparm --Istdout` print
// into DIR, which the init then uploads.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/rdinit"
)

func main() {
	if os.Getpid() == 1 {
		err := rdinit.Main(context.Background(), os.Stdout, nil)
		fmt.Println("hdparmguest init:", err)
		_ = rdinit.Halt(false)
		return
	}
	if len(os.Args) != 3 || os.Args[1] != "hdparm" {
		fmt.Fprintln(os.Stderr, "usage: hdparmguest hdparm DIR (in the recorder's ramdisk)")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := record(ctx, os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "hdparmguest:", err)
		os.Exit(1)
	}
}

func record(ctx context.Context, dir string) error {
	// The ramdisk writer gives extra files mode 0644.
	for _, g := range []string{"/usr/sbin/hdparm", "/lib64/*", "/lib/x86_64-linux-gnu/*"} {
		ms, _ := filepath.Glob(g)
		for _, m := range ms {
			_ = os.Chmod(m, 0o755)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	disks, err := filepath.Glob("/sys/block/sd*")
	if err != nil {
		return err
	}
	found := 0
	for _, d := range disks {
		vendor, err := os.ReadFile(filepath.Join(d, "device", "vendor"))
		if err != nil || strings.TrimSpace(string(vendor)) != "ATA" {
			continue
		}
		found++
		name := filepath.Base(d)
		model, _ := os.ReadFile(filepath.Join(d, "device", "model"))
		if err := os.WriteFile(filepath.Join(dir, name+".model"), model, 0o644); err != nil {
			return err
		}
		for _, c := range []struct{ flag, suffix string }{{"-I", ".hdparm-I"}, {"--Istdout", ".identify"}} {
			out, err := exec.CommandContext(ctx, "/usr/sbin/hdparm", c.flag, "/dev/"+name).Output()
			fmt.Printf("hdparmguest: hdparm %s /dev/%s: %v (%d bytes)\n", c.flag, name, err, len(out))
			if err != nil {
				return fmt.Errorf("hdparm %s /dev/%s: %w", c.flag, name, err)
			}
			if err := os.WriteFile(filepath.Join(dir, name+c.suffix), out, 0o644); err != nil {
				return err
			}
		}
	}
	if found == 0 {
		return fmt.Errorf("no ATA disk among %v", disks)
	}
	return nil
}
