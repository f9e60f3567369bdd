package blockdev

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mdFixture builds a /dev, /sys and /proc tree below a temporary root,
// shaped as the kernel shows it:
//
//	sda, sdb, sdc     disks with one partition each (sda1, sdb1, sdc1)
//	md0 = sda1 + sdb1 with partition md0p1
//	md1 = sda1 + sdc1 with partition md1p1
//	md2               an inactive array: no members
//	md3 = md0p1       an array on a partition of an array
//	md4 = md4         a corrupt tree that loops
//
// /dev entries are plain files; the Guard's stat says they are block
// devices, none of them mounted.
func mdFixture(t *testing.T) (*Guard, string) {
	t.Helper()
	root := t.TempDir()
	mk := func(rel string) {
		if err := os.MkdirAll(filepath.Join(root, rel), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	touch := func(rel string) {
		mk(filepath.Dir(rel))
		if err := os.WriteFile(filepath.Join(root, rel), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, rel string) {
		mk(filepath.Dir(rel))
		if err := os.Symlink(target, filepath.Join(root, rel)); err != nil {
			t.Fatal(err)
		}
	}
	devices := map[string]string{} // name -> its directory below /sys/devices
	disk := func(dir, name string, parts ...string) {
		devices[name] = dir + "/" + name
		mk("sys/devices/" + devices[name])
		for _, p := range parts {
			devices[p] = devices[name] + "/" + p
			touch("sys/devices/" + devices[p] + "/partition")
		}
	}
	for _, d := range []string{"sda", "sdb", "sdc"} {
		disk("pci0000:00/0000:00:05.0/host0/block", d, d+"1")
	}
	arrays := map[string][]string{
		"md0": {"sda1", "sdb1"},
		"md1": {"sda1", "sdc1"},
		"md2": nil,
		"md3": {"md0p1"},
		"md4": {"md4"},
	}
	for md, members := range arrays {
		var parts []string
		if md == "md0" || md == "md1" {
			parts = []string{md + "p1"}
		}
		disk("virtual/block", md, parts...)
		mk("sys/devices/" + devices[md] + "/md")
		mk("sys/devices/" + devices[md] + "/slaves")
		for _, m := range members {
			link("../../"+m, "sys/devices/"+devices[md]+"/slaves/"+m)
		}
	}
	for name, dir := range devices {
		link("../../devices/"+dir, "sys/class/block/"+name)
		touch("dev/" + name)
	}
	touch("proc/self/mountinfo")
	g := &Guard{root: root, stat: func(string) (devInfo, error) { return devInfo{block: true, rdev: 1<<8 | 7}, nil }}
	return g, root
}

// TestGuardMDArrays: an md device, and its partitions, may be written
// exactly when every member of the array is allowed, and a refusal names
// the member that is not.
func TestGuardMDArrays(t *testing.T) {
	g, root := mdFixture(t)
	dev := func(name string) string { return filepath.Join(root, "dev", name) }
	for _, tc := range []struct {
		allowed []string
		dev     string
		want    string // "" when allowed, else a part of the refusal
	}{
		{[]string{"sda", "sdb"}, "md0", ""},
		{[]string{"sda", "sdb"}, "md0p1", ""},
		{[]string{"sda1", "sdb1"}, "md0", ""},
		{[]string{"sda", "sdb1"}, "md0p1", ""},
		{[]string{"sda", "sdb"}, "md3", ""},
		{[]string{"md0"}, "md0p1", ""},
		{[]string{"sda"}, "md0", "md device md0 is built on " + dev("sdb1") + ", which is not allowed"},
		{[]string{"sda", "sdb"}, "md1", "md device md1 is built on " + dev("sdc1") + ", which is not allowed"},
		{[]string{"sda", "sdb"}, "md1p1", "md device md1 is built on " + dev("sdc1") + ", which is not allowed"},
		{[]string{"sda"}, "md3", "md device md0 is built on " + dev("sdb1") + ", which is not allowed"},
		{[]string{"sda", "sdb"}, "md2", "md device md2 has no member devices"},
		{[]string{"sda", "sdb"}, "md4", "md device md4 is built on " + dev("md4") + ", which is not allowed"},
		{[]string{"sda", "sdb"}, "sdc", "is not in the allowed devices"},
		{[]string{"sda", "sdb"}, "sdc1", "is not in the allowed devices"},
	} {
		g.allowed = nil
		for _, a := range tc.allowed {
			g.allowed = append(g.allowed, dev(a))
		}
		err := g.Check(dev(tc.dev))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("allowed %v: Check(%s) = %v, want nil", tc.allowed, tc.dev, err)
		case tc.want != "" && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("allowed %v: Check(%s) = %v, want a refusal saying %q", tc.allowed, tc.dev, err, tc.want)
		}
	}
	// A plain disk refusal says nothing about md.
	g.allowed = []string{dev("sda")}
	if err := g.Check(dev("sdc")); err == nil || strings.Contains(err.Error(), "md device") {
		t.Errorf("Check(sdc) = %v, want a refusal without md detail", err)
	}
	// An empty allow list still allows an unused array.
	g.allowed = nil
	if err := g.Check(dev("md1")); err != nil {
		t.Errorf("empty allow list: Check(md1) = %v", err)
	}
}
