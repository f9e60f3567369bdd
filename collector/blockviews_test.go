package collector

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestBlockViewsFixtures: every device of the fixture trees is listed,
// partitions with their disk and start, holders, and udev properties
// (derived from sysfs, or from the udev records of the tree).
func TestBlockViewsFixtures(t *testing.T) {
	for _, ignoreUdev := range []bool{false, true} {
		logger, records := newLogRecorder(t)
		views, err := BlockViews(context.Background(), Options{Root: fixtureRoot("qemu"), Logger: logger, IgnoreUdev: ignoreUdev})
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]BlockView{}
		for _, v := range views {
			byName[v.Name] = v
		}
		// nvme0c0n1 is the hidden path node of native NVMe multipath.
		for _, n := range []string{"fd0", "loop0", "nvme0n1", "sda", "sdc1", "sdd1", "sr0", "vda", "zram0"} {
			if _, ok := byName[n]; !ok {
				t.Errorf("udev %v: %s missing from %d views", !ignoreUdev, n, len(views))
			}
		}
		p := byName["sdc1"]
		if p.Type != "part" || p.Parent != "sdc" || p.Start <= 0 || p.Size <= 0 {
			t.Errorf("sdc1: %+v; want a partition of sdc with its start and size", p)
		}
		if d := byName["sda"]; d.Type != "disk" || d.Udev["ID_SERIAL"] == "" || d.MajMin == "" || !strings.HasPrefix(d.Udev["DEVPATH"], "/devices/") || d.Udev["SUBSYSTEM"] != "block" {
			t.Errorf("sda: %+v; want a disk with its udev serial", d)
		}
		if r := byName["sr0"]; r.Type != "rom" {
			t.Errorf("sr0: type %q; want rom", r.Type)
		}
		for i := 1; i < len(views); i++ {
			if devnoLess(views[i], views[i-1]) {
				t.Errorf("%s before %s: not in device-number order", views[i-1].Name, views[i].Name)
			}
		}
		if n := len(records()); n != 0 {
			t.Errorf("%d warnings on a well-formed tree", n)
		}
	}
}

func devnoLess(a, b BlockView) bool {
	var am, an, bm, bn int
	_, _ = fmt.Sscanf(a.MajMin, "%d:%d", &am, &an)
	_, _ = fmt.Sscanf(b.MajMin, "%d:%d", &bm, &bn)
	return am < bm || am == bm && an < bn
}
