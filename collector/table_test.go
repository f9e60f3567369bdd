package collector

import (
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/inventory"
)

func TestWriteTable(t *testing.T) {
	s := inventory.Ptr[string]
	inv := newInventory()
	inv.CPU.Count, inv.CPU.ModelName, inv.CPU.Frequency = 8, "Xeon", "2100.0000"
	inv.Memory.Total, inv.Memory.PhysicalMB = inventory.Ptr[int64](8<<30), inventory.Ptr[int64](8192)
	inv.Disks = append(inv.Disks, inventory.Disk{Name: "/dev/sda", Size: 480103981056, Rotational: false, Model: s("SSDSC2KB480G8"),
		Serial: s("PHYF0001"), WWN: s("0x55cd2e415000aaaa"), ByPath: s("/dev/disk/by-path/pci-0000:00:17.0-ata-1"), Tran: s("sata")})
	inv.Interfaces = append(inv.Interfaces, inventory.Interface{Name: "eno1", MACAddress: "3c:fd:fe:00:00:01",
		IPv4Address: s("192.0.2.5"), HasCarrier: true, SpeedMbps: inventory.Ptr(10000), Driver: s("i40e")})
	inv.BMCAddress = s("192.0.2.200")
	var b strings.Builder
	if err := WriteTable(&b, inv); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"8 x Xeon, 2100.0000 MHz", "8.0 GiB usable, 8.0 GiB installed", "/dev/sda", "447.1 GiB",
		"ssd/sata", "PHYF0001", "0x55cd2e415000aaaa", "pci-0000:00:17.0-ata-1", "3c:fd:fe:00:00:01", "10000 Mb/s", "i40e",
		"IPv4 192.0.2.200"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
