package collector

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/netnames"
)

// TestCaptureReproducesLive captures this machine and checks that the
// collector, pointed at the captured tree, gives back the live inventory.
func TestCaptureReproducesLive(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live, err := Capture(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	replayed, err := Collect(ctx, Options{Root: filepath.Join(dir, "root")})
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := WriteJSON(&a, live); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&b, replayed); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("captured tree gives a different inventory\nlive:\n%s\nreplayed:\n%s", a.String(), b.String())
	}
	// The inspection units ran during the capture, so the tree answers
	// them as this machine does, errors included.
	root := Options{Root: filepath.Join(dir, "root")}
	pl, perrl := PCIDevices(ctx, Options{})
	pt, perrt := PCIDevices(ctx, root)
	if !reflect.DeepEqual(pl, pt) || (perrl == nil) != (perrt == nil) {
		t.Errorf("PCIDevices: tree %+v, %v; live %+v, %v", pt, perrt, pl, perrl)
	}
	// A node's memory size is left out: a VM's host can resize its memory
	// (balloon, hot-plug) between the capture and this live read.
	nl, nerrl := ReadNUMATopology(ctx, Options{})
	nt, nerrt := ReadNUMATopology(ctx, root)
	if !reflect.DeepEqual(withoutNodeSizes(nl), withoutNodeSizes(nt)) || (nerrl == nil) != (nerrt == nil) {
		t.Errorf("ReadNUMATopology (node memory sizes left out): tree %+v, %v; live %+v, %v", nt, nerrt, nl, nerrl)
	}
	if len(pl) == 0 {
		t.Logf("this machine lists no PCI devices (%v): the pci_devices comparison is weak", perrl)
	}
	ul, uerrl := USBDevices(ctx, Options{})
	ut, uerrt := USBDevices(ctx, root)
	if !reflect.DeepEqual(ul, ut) || (uerrl == nil) != (uerrt == nil) {
		t.Errorf("USBDevices: tree %+v, %v; live %+v, %v", ut, uerrt, ul, uerrl)
	}
	dl, derrl := DMIDecode(ctx, Options{})
	dt, derrt := DMIDecode(ctx, root)
	if !reflect.DeepEqual(dl, dt) || (derrl == nil) != (derrt == nil) {
		t.Errorf("DMIDecode: tree %+v, %v; live %+v, %v", dt, derrt, dl, derrl)
	}
	xl, xerrl := ExtraHardware(ctx, Options{}, live)
	xt, xerrt := ExtraHardware(ctx, root, replayed)
	if !reflect.DeepEqual(xl, xt) || (xerrl == nil) != (xerrt == nil) {
		t.Errorf("ExtraHardware: tree %+v, %v; live %+v, %v", xt, xerrt, xl, xerrl)
	}
	// The tree holds what naming the NICs reads: the same names as here.
	nlive, errl := netnames.Plans("/sys", netnames.Default(), true)
	ntree, errt := netnames.Plans(filepath.Join(dir, "root", "sys"), netnames.Default(), true)
	if !reflect.DeepEqual(nlive, ntree) || len(errl) != len(errt) {
		t.Errorf("NIC names: tree %+v, %v; live %+v, %v", ntree, errt, nlive, errl)
	}
	saved, err := os.ReadFile(filepath.Join(dir, "inventory.json"))
	if err != nil || string(saved) != a.String() {
		t.Errorf("inventory.json differs from the live inventory (%v)", err)
	}
	// Refuses to mix two machines in one tree.
	if _, err := Capture(ctx, dir, Options{}); err == nil {
		t.Error("second capture into the same directory succeeded")
	}
	if _, err := Capture(ctx, t.TempDir(), Options{Root: dir}); err == nil {
		t.Error("capture of a non-live root succeeded")
	}
}

func TestCaptureFollowsLinks(t *testing.T) {
	src := tree(t, map[string]string{
		"sys/class/net/eth0":               "-> ../../devices/pci/net/eth0",
		"sys/devices/pci/net/eth0/address": "52:54:00:00:00:01\n",
		"sys/devices/pci/net/eth0/device":  "-> ../../../pci",
		"sys/devices/pci/vendor":           "0x1af4\n",
		"sys/devices/pci/unread":           "x\n",
		"dev/disk/by-path/pci-0":           "-> /dev/vda",
		"dev/vda":                          "",
	})
	dst := t.TempDir()
	cp := &copier{src: src, dst: dst}
	for _, p := range []tracedPath{
		{Path: "sys/class/net/eth0/device/vendor", Kind: accessRead},
		// What the collector read wins over the file as it is now.
		{Path: "sys/class/net/eth0/address", Kind: accessRead, Data: []byte("52:54:00:00:00:09\n")},
		{Path: "dev/disk/by-path/pci-0", Kind: accessLink},
		{Path: "sys/missing", Kind: accessRead},
	} {
		if err := cp.copyTraced(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{"sys/class/net/eth0/device", "dev/disk/by-path"} {
		if err := cp.copyListing(dir); err != nil {
			t.Fatal(err)
		}
	}
	check := func(rel, want string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", rel, b, err, want)
		}
	}
	check("sys/class/net/eth0/device/vendor", "0x1af4\n")
	check("sys/devices/pci/net/eth0/address", "52:54:00:00:00:09\n")
	check("sys/devices/pci/unread", "")
	check("dev/vda", "") // by-path link target kept resolvable
	if l, err := os.Readlink(filepath.Join(dst, "sys/class/net/eth0")); err != nil || l != "../../devices/pci/net/eth0" {
		t.Errorf("link = %q, %v", l, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "dev/disk/by-path/pci-0")); err != nil || l != "../../vda" {
		t.Errorf("absolute link rewritten to %q, %v", l, err)
	}
}

// withoutNodeSizes is a copy of topo with every node's memory size 0.
func withoutNodeSizes(topo *NUMATopology) *NUMATopology {
	if topo == nil {
		return nil
	}
	c := *topo
	c.RAM = make([]NUMARAM, len(topo.RAM))
	for i, r := range topo.RAM {
		c.RAM[i] = NUMARAM{NUMANode: r.NUMANode}
	}
	return &c
}
