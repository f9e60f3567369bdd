package hw

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
	"github.com/ironic-go/ironic-agent/inventory"
)

// TestDisksAgreeWithUdevInVM lives here, beside the guest program, so that
// the collector's own quick tests do not boot a VM; go test ./... runs it.
//
// It boots the lab VM (QEMU q35, Debian's kernel:
// virtio-blk, two scsi-hd on virtio-scsi, NVMe, two SATA disks on AHCI)
// with udev's own programs in the ramdisk. In the guest, udevadm's path_id
// builtin, scsi_id and ata_id (systemd 252, the ones Debian bookworm's
// ramdisks run) describe every disk, and their answers become
// /run/udev/data records. The disk inventory from those records must equal
// the one derived from sysfs alone, and every by_path must be udev's
// ID_PATH: the claim that the agent needs no udev, checked against udev.
func TestDisksAgreeWithUdevInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a VM under emulation (about 1-2 minutes)")
	}
	for _, p := range []string{"/lib/udev/scsi_id", "/lib/udev/ata_id", "/bin/udevadm"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("SKIPPED: %s (Debian package udev) missing: nothing of udev's to compare with", p)
		}
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("SKIPPED: qemu-system-x86_64 missing; ./test.sh installs qemu-system-x86")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	work := t.TempDir()
	files := map[string]string{
		"lib/udev/scsi_id": "/lib/udev/scsi_id",
		"lib/udev/ata_id":  "/lib/udev/ata_id",
		"usr/bin/udevadm":  "/bin/udevadm",
	}
	for _, bin := range []string{"/lib/udev/scsi_id", "/lib/udev/ata_id", "/bin/udevadm"} {
		out, err := exec.CommandContext(ctx, "ldd", bin).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", bin, err)
		}
		for _, w := range strings.Fields(string(out)) {
			if !strings.HasPrefix(w, "/") {
				continue
			}
			real, err := filepath.EvalSymlinks(w)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(w, "/")] = real
		}
	}
	// The guest and its ramdisk come from the shared ramdisk cache: built
	// once, reused by later runs while nothing in them changes.
	rd, err := qemu.BuildGuestRamdisk(ctx, "./internal/testbed/guest/udevcheck", files)
	if err != nil {
		t.Fatal(err)
	}
	m := qemu.DefaultMachine(qemu.BIOS)
	m.Dir = filepath.Join(work, "vm")
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.Append = "ironic_agent.cmd=run ironic_agent.dhcp=none ironic_agent.exit=poweroff"
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	line, err := vm.WaitFor(ctx, "UDEVCHECK-JSON ")
	if err != nil {
		t.Fatalf("no report from the guest: %v (console: %s)", err, vm.LogPath)
	}
	var rep udevReport
	if err := json.Unmarshal([]byte(line.Text[strings.Index(line.Text, "UDEVCHECK-JSON ")+len("UDEVCHECK-JSON "):]), &rep); err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Errors {
		t.Errorf("guest: %s", e)
	}
	if len(rep.Sysfs) != len(m.Disks) {
		t.Errorf("guest lists %d disks, the VM has %d", len(rep.Sysfs), len(m.Disks))
	}
	if len(rep.Helpers) != 4 {
		t.Errorf("scsi_id/ata_id answered for %d disks, want the 4 SCSI and SATA disks", len(rep.Helpers))
	}
	if !reflect.DeepEqual(rep.Udev, rep.Sysfs) {
		a, _ := json.MarshalIndent(rep.Udev, "", " ")
		b, _ := json.MarshalIndent(rep.Sysfs, "", " ")
		t.Errorf("udev programs and sysfs derivation disagree\nudev:  %s\nsysfs: %s", a, b)
	}
	for _, d := range rep.Sysfs {
		name := strings.TrimPrefix(d.Name, "/dev/")
		want := rep.PathID[name]["ID_PATH"]
		if got := strOrNull(d.ByPath); want == "" || got != `"/dev/disk/by-path/`+want+`"` {
			t.Errorf("%s: by_path %s, udevadm path_id says %q", d.Name, got, want)
		}
		if h, ok := rep.Helpers[name]; ok && (d.Serial == nil || d.WWN == nil || h["ID_WWN_WITH_EXTENSION"] != *d.WWN) {
			t.Errorf("%s: serial %s wwn %s, helper said %v", d.Name, strOrNull(d.Serial), strOrNull(d.WWN), h)
		}
	}
	t.Logf("udev programs and sysfs compared on %d disks, %.0fs after QEMU started", len(rep.Sysfs), vm.Elapsed().Seconds())
	// The report is all we need; the deferred Kill spares the power-off.
}

func strOrNull(p *string) string {
	if p == nil {
		return "null"
	}
	return `"` + *p + `"`
}

// udevReport is what internal/testbed/guest/udevcheck prints (its Report).
type udevReport struct {
	PathID  map[string]map[string]string // kernel name -> udevadm test-builtin path_id properties
	Helpers map[string]map[string]string // kernel name -> scsi_id or ata_id --export properties
	Errors  []string
	Udev    []inventory.Disk // Disks with the generated udev data
	Sysfs   []inventory.Disk // Disks with IgnoreUdev
}
