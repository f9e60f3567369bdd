package collector

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
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

// TestTracedFS: the view Capture gives Options.CaptureReaders keeps the
// fs.FS contract and traces what was read, listed and looked at.
func TestTracedFS(t *testing.T) {
	src := tree(t, map[string]string{
		"sys/bus/pci/devices/0000:00:01.0":           "-> ../../../devices/pci0000:00/0000:00:01.0",
		"sys/devices/pci0000:00/0000:00:01.0/vendor": "0x1af4\n",
		"sys/devices/pci0000:00/0000:00:01.0/device": "0x1045\n",
	})
	tr := newTracer()
	fsys := tracedFS{newRootFS(src, tr)}
	if err := fstest.TestFS(fsys, "sys/devices/pci0000:00/0000:00:01.0/vendor"); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.ReadFile("../etc/passwd"); err == nil {
		t.Error("read a name outside the root")
	}

	tr = newTracer()
	fsys = tracedFS{newRootFS(src, tr)}
	if _, err := fs.ReadDir(fsys, "sys/bus/pci/devices"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(fsys, "sys/bus/pci/devices/0000:00:01.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.ReadFile(fsys, "sys/bus/pci/devices/0000:00:01.0/vendor"); err != nil {
		t.Fatal(err)
	}
	got := map[string]tracedPath{}
	for _, p := range tr.list() {
		got[p.Path] = p
	}
	for path, kind := range map[string]accessKind{
		"sys/bus/pci/devices":                     accessDir,
		"sys/bus/pci/devices/0000:00:01.0":        accessStat,
		"sys/bus/pci/devices/0000:00:01.0/vendor": accessRead,
	} {
		if got[path].Kind&kind == 0 {
			t.Errorf("%s traced as %v, want %v", path, got[path].Kind, kind)
		}
	}
	if d := got["sys/bus/pci/devices/0000:00:01.0/vendor"].Data; string(d) != "0x1af4\n" {
		t.Errorf("vendor recorded as %q", d)
	}
}
