package collector

import (
	"context"
	"reflect"
	"testing"

	"github.com/ironic-go/ironic-agent/collector/internal/vpdtest"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/inventory/hints"
)

// The server tree's SCSI disks as multipath candidates, by both routes:
// the two FC paths share the LUN's WWID and are held by the map dm-0
// (mpatha: that server's multipath-tools gave friendly names), the
// SAS disks are held by md0, and the USB stick (no ID_WWN, no
// SCSI_IDENT_*) and the CD-ROM are no candidates.
func TestMultipathPathsServer(t *testing.T) {
	want := []inventory.MultipathPath{
		{Name: "sda", Major: 8, Minor: 0, Sectors: 1200 * 1000 * mib / 512, WWID: "3600a0b800012345600000000abcdef01", Held: true},
		{Name: "sdb", Major: 8, Minor: 16, Sectors: 1200 * 1000 * mib / 512, WWID: "35000c50012345703", Held: true},
		{Name: "sdc", Major: 8, Minor: 32, Sectors: 500 * 1000 * mib / 512, WWID: "3600a0b800012345600000000abcde000", Held: true, Map: "mpatha"},
		{Name: "sdd", Major: 8, Minor: 48, Sectors: 500 * 1000 * mib / 512, WWID: "3600a0b800012345600000000abcde000", Held: true, Map: "mpatha"},
	}
	for _, ignoreUdev := range []bool{false, true} {
		got, err := MultipathPaths(context.Background(), Options{Root: fixtureRoot("server"), IgnoreUdev: ignoreUdev})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ignoreUdev %v:\n got %+v\nwant %+v", ignoreUdev, got, want)
		}
	}
}

// Two paths to one LUN before any map exists (the ramdisk at start): both
// are free candidates with the same WWID; a disk whose page 0x83 has only
// a T10 vendor designator (QEMU's scsi-hd without wwn=) is none.
func TestMultipathPathsUnheld(t *testing.T) {
	tr := newTree()
	pci := "sys/devices/pci0000:00"
	tr.dir(pci)
	hba := tr.device(pci+"/0000:00:04.0", "sys/bus/pci")
	host := tr.scsiHost(hba, 2, "virtio_scsi")
	for i, name := range []string{"sda", "sdb", "sdc"} {
		page := vpd83(naaDesig("5000c500a1b2c3d4"))
		if name == "sdc" {
			page = vpd83(asciiDesig(0x01, "QEMU    QEMU HARDDISK   LAB-0003"))
		}
		d := tr.scsiDevice(host, scsiSpec{hctl: "2:0:" + itoa(i) + ":0", vendor: "QEMU", model: "QEMU HARDDISK", rev: "2.5+",
			vpd80: vpdtest.Page(0x80, []byte("LAB-MP-0001")), vpd83: page})
		tr.block(d+"/block/"+name, d, blockSpec{devno: "8:" + itoa(16*i), bytes: 64 * mib})
	}
	root := t.TempDir()
	if err := tr.write(root); err != nil {
		t.Fatal(err)
	}
	got, err := MultipathPaths(context.Background(), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	want := []inventory.MultipathPath{
		{Name: "sda", Major: 8, Minor: 0, Sectors: 64 * mib / 512, WWID: "35000c500a1b2c3d4"},
		{Name: "sdb", Major: 8, Minor: 16, Sectors: 64 * mib / 512, WWID: "35000c500a1b2c3d4"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
	if _, err := MultipathPaths(context.Background(), Options{Root: t.TempDir()}); err != nil {
		t.Errorf("an empty root: %v", err)
	}
}

// Root-device hints with the LUN's wwn or serial (the values IPA reports
// for the map) choose the map: its paths are not in the inventory to be
// chosen, and the path's own serial (page 0x80) names nothing.
func TestHintsChooseTheMap(t *testing.T) {
	disks, err := Disks(context.Background(), Options{Root: fixtureRoot("server")})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		hint map[string]any
		want string
	}{
		{map[string]any{"wwn": "0x600a0b800012345600000000abcde000"}, "/dev/dm-0"},
		{map[string]any{"serial": "3600a0b800012345600000000abcde000"}, "/dev/dm-0"},
		{map[string]any{"wwn": "0x600a0b800012345600000000abcde000", "serial": "3600a0b800012345600000000abcde000"}, "/dev/dm-0"},
		{map[string]any{"serial": "SV12345678"}, ""},
	} {
		h, err := hints.ParseRootDeviceHints(c.hint)
		if err != nil {
			t.Fatal(err)
		}
		got, err := hints.ChooseRootDisk(hints.Disks(disks), h)
		if c.want == "" {
			if err == nil {
				t.Errorf("%v chose %s, want no disk", c.hint, got.Name)
			}
			continue
		}
		if err != nil || got.Name != c.want {
			t.Errorf("%v chose %q (%v), want %s", c.hint, got.Name, err, c.want)
		}
	}
}
