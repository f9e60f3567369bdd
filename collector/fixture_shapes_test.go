package collector

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/inventory"
)

// TestFixtureServerShapes states, independently of the golden files (which
// -update rewrites), what IPA reports for the hand-made server shapes:
// RAID logical drives' NAA names, FC paths, NVMe namespaces with native
// multipath on and off, and the NUMA node of NICs and PCI devices. Each
// fixture's README says where the expectations come from.
func TestFixtureServerShapes(t *testing.T) {
	ctx := context.Background()
	// disks maps each listed disk's name to its record; names keeps
	// lsblk's order.
	disks := func(t *testing.T, fixture string, ignoreUdev bool) (map[string]inventory.Disk, string) {
		t.Helper()
		ds, err := Disks(ctx, Options{Root: filepath.Join(fixturesDir, fixture, "root"), IgnoreUdev: ignoreUdev})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]inventory.Disk{}
		var names []string
		for _, d := range ds {
			m[d.Name] = d
			names = append(names, d.Name)
		}
		return m, strings.Join(names, " ")
	}
	str := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	num := func(p *int) int {
		if p == nil {
			return -1
		}
		return *p
	}
	for _, ignoreUdev := range []bool{false, true} {
		hpe, _ := disks(t, "hpe-dl380-smartarray-e810", ignoreUdev)
		sda := hpe["/dev/sda"]
		if str(sda.WWN) != "0x600508b1001c79ade5178f0626caaa9c" || str(sda.WWNVendorExtension) != "0xe5178f0626caaa9c" ||
			str(sda.Serial) != "600508b1001c79ade5178f0626caaa9c" || str(sda.HCTL) != "0:1:0:0" || str(sda.Tran) != "sas" ||
			str(sda.Vendor) != "HPE" || str(sda.Model) != "LOGICAL VOLUME" ||
			str(sda.ByPath) != "/dev/disk/by-path/pci-0000:31:00.0-scsi-0:1:0:0" {
			t.Errorf("Smart Array logical drive (udev ignored: %v): %+v", ignoreUdev, sda)
		}

		mr, _ := disks(t, "supermicro-megaraid-fc", ignoreUdev)
		if vd := mr["/dev/sda"]; vd.Tran != nil || str(vd.HCTL) != "0:2:0:0" || str(vd.WWNVendorExtension) != "0x1f9744221d0dc495" {
			t.Errorf("MegaRAID virtual drive (udev ignored: %v): %+v", ignoreUdev, vd)
		}
		if jbod := mr["/dev/sdc"]; str(jbod.Serial) != "ZC1B2C3D0000C1234ABC" || str(jbod.WWN) != "0x5000c500a1b2c3d7" ||
			jbod.WWNVendorExtension != nil || num(jbod.PhysicalSectors) != 4096 {
			t.Errorf("MegaRAID JBOD disk (udev ignored: %v): %+v", ignoreUdev, jbod)
		}
		p1, p2 := mr["/dev/sdd"], mr["/dev/sde"]
		if str(p1.Tran) != "fc" || str(p1.WWN) != str(p2.WWN) || str(p1.Serial) != str(p2.Serial) ||
			str(p1.ByPath) != "/dev/disk/by-path/pci-0000:31:00.0-fc-0x524a937f1c2d3e01-lun-1" ||
			str(p2.ByPath) != "/dev/disk/by-path/pci-0000:31:00.1-fc-0x524a937f1c2d3e11-lun-1" {
			t.Errorf("FC paths of one LUN (udev ignored: %v): %+v, %+v", ignoreUdev, p1, p2)
		}
	}

	on, onNames := disks(t, "nvme-multinamespace", false)
	off, offNames := disks(t, "nvme-multinamespace-no-multipath", false)
	if got := onNames; got != "/dev/nvme0n1 /dev/nvme0n2 /dev/nvme0n3 /dev/nvme1n1" {
		t.Errorf("NVMe disks with native multipath: %s", got)
	}
	if got := offNames; got != "/dev/nvme0n1 /dev/nvme0n2 /dev/nvme0n3 /dev/nvme1n1 /dev/nvme2n1" {
		t.Errorf("NVMe disks without native multipath: %s", got)
	}
	if a, b := off["/dev/nvme1n1"], off["/dev/nvme2n1"]; str(a.WWN) != str(b.WWN) || str(a.ByPath) == str(b.ByPath) {
		t.Errorf("shared namespace seen by two controllers: %+v, %+v", a, b)
	}
	if ns2 := on["/dev/nvme0n2"]; num(ns2.LogicalSectors) != 4096 || str(ns2.ByPath) != "/dev/disk/by-path/pci-0000:31:00.0-nvme-2" ||
		str(ns2.WWN) != "eui.36344e3052501230002538e400000002" || str(ns2.Serial) != "S4YNNE0N500123" {
		t.Errorf("second namespace of drive A: %+v", ns2)
	}

	root := filepath.Join(fixturesDir, "hpe-dl380-smartarray-e810", "root")
	topo, err := ReadNUMATopology(ctx, Options{Root: root})
	if err != nil || topo == nil {
		t.Fatalf("NUMA topology: %v, %v", topo, err)
	}
	if !slices.Contains(topo.NICs, NUMANIC{Name: "ens5f0", NUMANode: 1}) || !slices.Contains(topo.NICs, NUMANIC{Name: "eno1", NUMANode: 0}) ||
		len(topo.RAM) != 2 || len(topo.CPUs) != 32 {
		t.Errorf("two-socket NUMA topology: %+v", topo)
	}
	pci, err := PCIDevices(ctx, Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(pci, func(d PCIDevice) bool { return d.Bus == "0000:aa:00.0" })
	if i < 0 || str(pci[i].NUMANodeID) != "1" {
		t.Errorf("E810 PCI function on node 1: %+v", pci)
	}
}
