// Command udevcheck is the guest side of e2e/hw's
// TestDisksAgreeWithUdevInVM: the /init of a test ramdisk that also carries
// udev's scsi_id, ata_id and udevadm. As PID 1 it runs the agent ramdisk's
// init, which starts "udevcheck run"; that asks udev's own programs about
// every disk (udevadm test-builtin path_id, scsi_id, ata_id), writes what
// they say into /run/udev/data as udev's rules would, and prints one
// "UDEVCHECK-JSON {...}" line with the udev programs' answers and the disk
// inventory by both routes (udev data, sysfs only).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/collector"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/inventory"
)

// Report is what the guest prints; the test decodes the same shape.
type Report struct {
	PathID  map[string]map[string]string // kernel name -> udevadm test-builtin path_id properties
	Helpers map[string]map[string]string // kernel name -> scsi_id or ata_id --export properties
	Errors  []string
	Udev    []inventory.Disk // Disks with the generated udev data
	Sysfs   []inventory.Disk // Disks with IgnoreUdev
}

func main() {
	if os.Getpid() == 1 {
		err := rdinit.Main(context.Background(), os.Stdout, nil)
		fmt.Println("udevcheck init:", err)
		_ = rdinit.Halt(false)
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "run" {
		fmt.Fprintln(os.Stderr, "usage: udevcheck run (in the test ramdisk)")
		os.Exit(2)
	}
	b, err := json.Marshal(check())
	if err != nil {
		fmt.Println("UDEVCHECK-ERROR", err)
		os.Exit(1)
	}
	fmt.Printf("UDEVCHECK-JSON %s\n", b)
}

func props(out []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && k != "" && !strings.ContainsAny(k, " :") {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func check() Report {
	rep := Report{PathID: map[string]map[string]string{}, Helpers: map[string]map[string]string{}}
	// The init waits for block devices to settle; SCSI scanning can still
	// add the last disks a moment later.
	time.Sleep(2 * time.Second)
	// The initramfs writer gives extra files mode 0644.
	for _, g := range []string{"/lib/udev/*", "/usr/bin/udevadm", "/lib64/*", "/lib/x86_64-linux-gnu/*"} {
		ms, _ := filepath.Glob(g)
		for _, m := range ms {
			_ = os.Chmod(m, 0o755)
		}
	}
	if err := os.MkdirAll("/run/udev/data", 0o755); err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	}
	entries, _ := os.ReadDir("/sys/block")
	for _, e := range entries {
		n := e.Name()
		out, err := exec.Command("/usr/bin/udevadm", "test-builtin", "path_id", "/sys/class/block/"+n).Output()
		if err == nil {
			rep.PathID[n] = props(out)
		}
		if !strings.HasPrefix(n, "sd") {
			continue
		}
		vendor, _ := os.ReadFile("/sys/block/" + n + "/device/vendor")
		helper := exec.Command("/lib/udev/scsi_id", "--export", "--whitelisted", "-d", "/dev/"+n)
		if strings.TrimSpace(string(vendor)) == "ATA" {
			helper = exec.Command("/lib/udev/ata_id", "--export", "/dev/"+n)
		}
		hout, err := helper.Output()
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", strings.Join(helper.Args, " "), err))
			continue
		}
		p := props(hout)
		rep.Helpers[n] = p
		// The udev database record 60-persistent-storage.rules would leave.
		var rec []string
		for k, v := range p {
			rec = append(rec, "E:"+k+"="+v)
		}
		for k, v := range rep.PathID[n] {
			rec = append(rec, "E:"+k+"="+v)
		}
		devno, _ := os.ReadFile("/sys/block/" + n + "/dev")
		f := "/run/udev/data/b" + strings.TrimSpace(string(devno))
		if err := os.WriteFile(f, []byte(strings.Join(rec, "\n")+"\n"), 0o644); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
	}
	ctx := context.Background()
	var err error
	if rep.Udev, err = collector.Disks(ctx, collector.Options{Root: "/"}); err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	}
	if rep.Sysfs, err = collector.Disks(ctx, collector.Options{Root: "/", IgnoreUdev: true}); err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	}
	return rep
}
