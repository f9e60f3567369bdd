package collector

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/internal/testbed/lsblktest"
	"github.com/ironic-go/ironic-agent/inventory"

	"github.com/ironic-go/ironic-agent/collector/internal/udev"
)

// TestMain runs the tests in a private mount namespace: their mounts and
// loop devices go with the test binary, even when it is killed.
func TestMain(m *testing.M) { looptest.Main(m.Run) }

// lsblkDev is one device as lsblk prints it.
type lsblkDev = lsblktest.Device

// runLsblk lists every block device lsblk knows (all tree levels), keyed by
// name. The test execs lsblk only to have an independent reference.
func runLsblk(t *testing.T, args ...string) map[string]lsblkDev {
	t.Helper()
	return lsblktest.Devices(t, args...)
}

// compareWithLsblk checks one of our records against lsblk's view of the
// same device. Without udev lsblk reads MODEL and SERIAL raw from sysfs
// and has no WWN, so those are compared only where lsblk has a value.
func compareWithLsblk(t *testing.T, d inventory.Disk, l lsblkDev) {
	t.Helper()
	if d.Size != int64(l.Size) {
		t.Errorf("%s: size %d, lsblk %d", d.Name, d.Size, l.Size)
	}
	if d.Rotational != (l.Rota != 0) {
		t.Errorf("%s: rotational %v, lsblk %v", d.Name, d.Rotational, l.Rota)
	}
	if d.LogicalSectors == nil || *d.LogicalSectors != int(l.LogSec) {
		t.Errorf("%s: logical_sectors %v, lsblk %d", d.Name, deref(d.LogicalSectors), l.LogSec)
	}
	if d.PhysicalSectors == nil || *d.PhysicalSectors != int(l.PhySec) {
		t.Errorf("%s: physical_sectors %v, lsblk %d", d.Name, deref(d.PhysicalSectors), l.PhySec)
	}
	if got, want := strOrNull(d.Tran), strOrNull(l.Tran); got != want {
		t.Errorf("%s: tran %s, lsblk %s", d.Name, got, want)
	}
	if l.Model != nil && *l.Model != "" && (d.Model == nil || *d.Model != udev.NormalizeWhitespace(*l.Model)) {
		t.Errorf("%s: model %s, lsblk %q", d.Name, strOrNull(d.Model), *l.Model)
	}
	if l.Serial != nil && *l.Serial != "" && (d.Serial == nil || *d.Serial != udev.NormalizeWhitespace(*l.Serial)) {
		t.Errorf("%s: serial %s, lsblk %q", d.Name, strOrNull(d.Serial), *l.Serial)
	}
	if l.WWN != nil && *l.WWN != "" && (d.WWN == nil || *d.WWN != *l.WWN) {
		t.Errorf("%s: wwn %s, lsblk %q", d.Name, strOrNull(d.WWN), *l.WWN)
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func strOrNull(p *string) string {
	if p == nil || *p == "" {
		return "null"
	}
	return strconv.Quote(*p)
}

// TestDisksMatchLsblk compares Disks() on this machine with lsblk: every
// disk both list agrees, and the set we list is the set IPA keeps from
// lsblk's output, decided by lsblktest.IPASkips from lsblk's own columns
// and the kernel's driver names, not from our sysfs rules.
func TestDisksMatchLsblk(t *testing.T) {
	if _, err := os.Stat("/sys/block"); err != nil {
		t.Skip("SKIPPED: no /sys/block on this machine")
	}
	disks, err := Disks(context.Background(), Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ls := runLsblk(t, "-a")
	ours := map[string]bool{}
	for _, d := range disks {
		name := strings.TrimPrefix(d.Name, "/dev/")
		ours[name] = true
		l, ok := ls[name]
		if !ok {
			t.Errorf("%s: listed by us, unknown to lsblk", d.Name)
			continue
		}
		compareWithLsblk(t, d, l)
	}
	drivers := lsblktest.Drivers(t)
	kept, skipped := 0, map[string]int{}
	for name, l := range ls {
		why := lsblktest.IPASkips(l, drivers)
		if why == "" {
			kept++
		} else {
			skipped[why]++
		}
		if why == "" && !ours[name] {
			t.Errorf("%s: lsblk type %s size %d, IPA would list it, we do not", name, l.Type, l.Size)
		}
		if why != "" && ours[name] {
			t.Errorf("%s: lsblk type %s size %d: IPA skips it (%s), we list it", name, l.Type, l.Size, why)
		}
	}
	if kept == 0 && len(disks) == 0 {
		t.Skipf("SKIPPED: lsblk shows no device IPA would list (skipped, by reason: %v) and neither do we: nothing to compare", skipped)
	}
	t.Logf("%d disks agree with lsblk; lsblk devices IPA skips, by reason: %v", len(disks), skipped)
}

// TestBlockDevicesLoop attaches a loop device over a sparse file of a size
// no other device here has, with 4096-byte logical sectors, and checks
// BlockDevices reports it (loop devices bypass IPA's type filter) with the
// right size and sector sizes, agreeing with lsblk.
func TestBlockDevicesLoop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: attaching a loop device")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Fatal("losetup (util-linux) missing; ./test.sh installs it")
	}
	dir := filepath.Join(os.TempDir(), "disks-loop")
	if _, err := os.Stat("/work/tmp"); err == nil {
		dir = "/work/tmp/disks"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(dir, "loop-*.img")
	if err != nil {
		t.Fatal(err)
	}
	img := f.Name()
	t.Cleanup(func() { os.Remove(img) })
	const size = 96<<20 + 4096*3 // odd size to be sure we read this device
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dev := looptest.AttachFile(t, img, "--sector-size", "4096")

	got, err := BlockDevices(context.Background(), Options{Logger: testLogger(t)}, []string{dev, dev})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d records for one device named twice", len(got))
	}
	d := got[0]
	if d.Name != dev || d.Size != size {
		t.Errorf("got %s size %d, want %s size %d", d.Name, d.Size, dev, size)
	}
	if d.LogicalSectors == nil || *d.LogicalSectors != 4096 {
		t.Errorf("logical_sectors = %v, want 4096", deref(d.LogicalSectors))
	}
	l, ok := runLsblk(t, dev)[strings.TrimPrefix(dev, "/dev/")]
	if !ok {
		t.Fatalf("lsblk does not list %s", dev)
	}
	compareWithLsblk(t, d, l)
	for _, p := range []*string{d.Model, d.Serial, d.WWN, d.Vendor, d.HCTL, d.ByPath, d.Tran} {
		if p != nil {
			t.Errorf("loop device has a value where IPA has null: %+v", d)
			break
		}
	}
	// The inventory proper never lists loop devices.
	all, err := Disks(context.Background(), Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range all {
		if x.Name == dev {
			t.Errorf("Disks lists loop device %s", dev)
		}
	}
	if _, err := BlockDevices(context.Background(), Options{}, []string{"/dev/nonexistent-disk"}); err == nil {
		t.Error("BlockDevices accepted a device that does not exist")
	}
	for _, bad := range []string{"", "/dev/", "/dev/../etc", "a/b"} {
		if _, err := BlockDevices(context.Background(), Options{}, []string{bad}); err == nil {
			t.Errorf("BlockDevices accepted name %q", bad)
		}
	}
}
