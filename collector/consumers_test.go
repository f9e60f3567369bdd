package collector_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gcinventory "github.com/gophercloud/gophercloud/v2/openstack/baremetal/inventory"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/collector"
	"github.com/ironic-go/ironic-agent/inventory"
)

// The consumers of our JSON are Go programs: Metal3's baremetal-operator
// decodes Ironic's inventory with gophercloud's types and converts it with
// the standard plugin data. These tests decode what we produce with those
// types (a test-only dependency) and check the fields Metal3 reads.

// richInventory sets every field a consumer reads, which the CI machine's
// fixture cannot (no wwn, hctl, speed or LLDP there).
func richInventory() *inventory.Inventory {
	s := inventory.Ptr[string]
	return &inventory.Inventory{
		Interfaces: []inventory.Interface{{
			Name: "eno1", MACAddress: "3c:fd:fe:aa:bb:cc", IPv4Address: s("192.0.2.5"), IPv6Address: s("fe80::1%eno1"),
			HasCarrier: true, LLDP: []inventory.LLDPTLV{{Type: 1, Value: "04885a92ec5459"}, {Type: 0, Value: ""}},
			Vendor: s("0x8086"), Product: s("0x1572"), SpeedMbps: inventory.Ptr(25000), PCIAddress: s("0000:3b:00.0"), Driver: s("i40e"),
		}, {
			Name: "ib0", MACAddress: "7c:fe:90:29:26:52", ClientID: s("ff:00:00:00:00:00:02:00:00:02:c9:00:7c:fe:90:03:00:29:26:52"),
			Vendor: s("0x15b3"), Product: s("0x1017"),
		}},
		CPU: inventory.CPU{ModelName: "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz", Frequency: "3900.0000", Count: 80,
			Architecture: "x86_64", Flags: []string{"fpu", "sse2"}, SocketCount: 2},
		Disks: []inventory.Disk{{
			Name: "/dev/sda", Model: s("AL15SEB120N"), Size: 1200243695616, Rotational: true, WWN: s("0x50000399e8a1b2c3"),
			Serial: s("X9A0A0B1FXYZ"), Vendor: s("TOSHIBA"), WWNWithExtension: s("0x50000399e8a1b2c30000000000000000"),
			WWNVendorExtension: s("0x0000000000000000"), HCTL: s("0:0:0:0"), ByPath: s("/dev/disk/by-path/pci-0000:18:00.0-sas-0x5000039988776655-lun-0"),
			LogicalSectors: inventory.Ptr(512), PhysicalSectors: inventory.Ptr(512), Tran: s("sas"),
		}, {
			Name: "/dev/nvme0n1", Model: s("Dell Ent NVMe P5600 MU U.2 1.6TB"), Size: 1600321314816, Serial: s("PHAB1234"),
			ByPath: nil, LogicalSectors: inventory.Ptr(512), PhysicalSectors: inventory.Ptr(512), Tran: s("nvme"),
		}},
		Memory:       inventory.Memory{Total: inventory.Ptr[int64](201326592000), PhysicalMB: inventory.Ptr[int64](196608)},
		BMCAddress:   s("192.0.2.200"),
		BMCV6Address: s("::/0"),
		SystemVendor: inventory.SystemVendor{ProductName: "PowerEdge R640", SerialNumber: "ABC1234", Manufacturer: "Dell Inc.",
			Firmware: inventory.Firmware{Vendor: "Dell Inc.", Version: "2.19.1", BuildDate: "06/11/2023"}},
		Boot:     inventory.Boot{CurrentBootMode: "uefi", PXEInterface: s("3c:fd:fe:aa:bb:cc")},
		Hostname: "node-7",
		BMCMAC:   s("d0:94:66:00:00:01"),
	}
}

// inspectionDocument wraps an inventory the way Ironic stores inspection
// data, with the plugin data its standard hooks derive from the inventory
// (all_interfaces, root_disk, macs, lldp_raw).
func inspectionDocument(t *testing.T, inv *inventory.Inventory) []byte {
	t.Helper()
	allIfaces := map[string]any{}
	lldp := map[string]any{}
	var macs []string
	for _, i := range inv.Interfaces {
		b, _ := json.Marshal(i)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		m["pxe_enabled"] = inv.Boot.PXEInterface != nil && *inv.Boot.PXEInterface == i.MACAddress
		allIfaces[i.Name] = m
		macs = append(macs, i.MACAddress)
		if i.LLDP != nil {
			lldp[i.Name] = i.LLDP
		}
	}
	plugin := map[string]any{"all_interfaces": allIfaces, "valid_interfaces": allIfaces, "macs": macs, "lldp_raw": lldp}
	if len(inv.Disks) > 0 {
		plugin["root_disk"] = inv.Disks[0]
	}
	if inv.Boot.PXEInterface != nil {
		plugin["boot_interface"] = *inv.Boot.PXEInterface
	}
	b, err := json.Marshal(map[string]any{"inventory": inv, "plugin_data": plugin})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkWithGophercloud(t *testing.T, inv *inventory.Inventory) {
	t.Helper()
	var data nodes.InventoryData
	if err := json.Unmarshal(inspectionDocument(t, inv), &data); err != nil {
		t.Fatalf("gophercloud cannot decode our inventory: %v", err)
	}
	got := data.Inventory
	if inv.Memory.PhysicalMB != nil && int64(got.Memory.PhysicalMb) != *inv.Memory.PhysicalMB {
		t.Errorf("memory.physical_mb decodes as %d, want %d", got.Memory.PhysicalMb, *inv.Memory.PhysicalMB)
	}
	if inv.Memory.Total != nil && int64(got.Memory.Total) != *inv.Memory.Total {
		t.Errorf("memory.total decodes as %d", got.Memory.Total)
	}
	if got.CPU.Count != inv.CPU.Count || got.CPU.Architecture != inv.CPU.Architecture || got.CPU.ModelName != inv.CPU.ModelName {
		t.Errorf("cpu decodes as %+v", got.CPU)
	}
	if inv.CPU.Frequency != "" {
		// Metal3 parses the frequency as a float.
		if _, err := strconv.ParseFloat(got.CPU.Frequency, 64); err != nil || got.CPU.Frequency != inv.CPU.Frequency {
			t.Errorf("cpu.frequency decodes as %q (%v)", got.CPU.Frequency, err)
		}
	}
	if len(got.Disks) != len(inv.Disks) {
		t.Fatalf("%d disks decode, want %d", len(got.Disks), len(inv.Disks))
	}
	for i, d := range inv.Disks {
		g := got.Disks[i]
		if g.Name != d.Name || g.Size != d.Size || g.Rotational != d.Rotational || g.ByPath != str(d.ByPath) ||
			g.Serial != str(d.Serial) || g.Wwn != str(d.WWN) || g.WwnWithExtension != str(d.WWNWithExtension) ||
			g.WwnVendorExtension != str(d.WWNVendorExtension) || g.Hctl != str(d.HCTL) || g.Model != str(d.Model) || g.Vendor != str(d.Vendor) {
			t.Errorf("disk %s decodes as %+v", d.Name, g)
		}
		// Metal3 names a disk by its by_path when there is one.
		name := g.Name
		if g.ByPath != "" {
			name = g.ByPath
		}
		if d.ByPath != nil && name != *d.ByPath {
			t.Errorf("disk %s: Metal3 name %q", d.Name, name)
		}
	}
	if len(got.Interfaces) != len(inv.Interfaces) {
		t.Fatalf("%d interfaces decode, want %d", len(got.Interfaces), len(inv.Interfaces))
	}
	for i, n := range inv.Interfaces {
		g := got.Interfaces[i]
		speed := 0
		if n.SpeedMbps != nil {
			speed = *n.SpeedMbps
		}
		if g.Name != n.Name || g.MACAddress != n.MACAddress || g.IPV4Address != str(n.IPv4Address) ||
			g.IPV6Address != str(n.IPv6Address) || g.HasCarrier != n.HasCarrier || g.SpeedMbps != speed ||
			g.PCIAddress != str(n.PCIAddress) || g.Vendor != str(n.Vendor) || g.Product != str(n.Product) || g.ClientID != str(n.ClientID) {
			t.Errorf("interface %s decodes as %+v", n.Name, g)
		}
	}
	if got.SystemVendor.Manufacturer != inv.SystemVendor.Manufacturer || got.SystemVendor.Firmware.Version != inv.SystemVendor.Firmware.Version {
		t.Errorf("system_vendor decodes as %+v", got.SystemVendor)
	}
	if got.Boot.CurrentBootMode != inv.Boot.CurrentBootMode || got.Hostname != inv.Hostname || got.BmcAddress != str(inv.BMCAddress) {
		t.Errorf("boot/hostname/bmc decode as %+v %q %q", got.Boot, got.Hostname, got.BmcAddress)
	}

	std, err := data.PluginData.AsStandardData()
	if err != nil {
		t.Fatalf("standard plugin data: %v", err)
	}
	for _, n := range inv.Interfaces {
		pi, ok := std.AllInterfaces[n.Name]
		if !ok || pi.MACAddress != n.MACAddress || pi.PCIAddress != str(n.PCIAddress) {
			t.Errorf("all_interfaces[%s] = %+v", n.Name, pi)
		}
		if n.LLDP != nil && len(std.RawLLDP[n.Name]) != len(n.LLDP) {
			t.Errorf("lldp_raw[%s] = %v, want %d TLVs", n.Name, std.RawLLDP[n.Name], len(n.LLDP))
		}
	}
	if len(inv.Disks) > 0 && (std.RootDisk.Name != inv.Disks[0].Name || std.RootDisk.ByPath != str(inv.Disks[0].ByPath)) {
		t.Errorf("root_disk = %+v", std.RootDisk)
	}
	if len(std.MACs) != len(inv.Interfaces) {
		t.Errorf("macs = %v", std.MACs)
	}
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func TestGophercloudDecodesRichInventory(t *testing.T) {
	checkWithGophercloud(t, richInventory())
}

// TestGophercloudDecodesFixtures runs the same checks over every golden
// inventory, so a new fixture shape is checked against the consumer too.
func TestGophercloudDecodesFixtures(t *testing.T) {
	paths, err := filepath.Glob("../fixtures/*/inventory.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixture inventories (%v)", err)
	}
	for _, p := range paths {
		t.Run(filepath.Base(filepath.Dir(p)), func(t *testing.T) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var inv inventory.Inventory
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&inv); err != nil {
				t.Fatal(err)
			}
			checkWithGophercloud(t, &inv)
		})
	}
}

// TestOurJSONKeepsIPAKeys guards the wire shape gophercloud does not see:
// nulls stay null and the master-only keys are present.
func TestOurJSONKeepsIPAKeys(t *testing.T) {
	var b bytes.Buffer
	if err := collector.WriteJSON(&b, richInventory()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"biosdevname": null`, `"socket_count": 2`, `"logical_sectors": 512`, `"tran": "sas"`,
		`"bmc_v6address": "::/0"`, `"bmc_mac": "d0:94:66:00:00:01"`, `"lldp": [`, `"driver": "i40e"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

// TestGophercloudDecodesExtraHardware turns each fixture's extra-hardware
// list into "extra" as the inspection hook does (ironic-inspector's and
// Ironic's extra_hardware: nested by category and item, numeric strings
// made numbers), decodes it with gophercloud's plugin-data type, and reads
// the BIOS the way Metal3's baremetal-operator did from inspector data.
func TestGophercloudDecodesExtraHardware(t *testing.T) {
	dirs, _ := filepath.Glob("../fixtures/*/extra-hardware.json")
	if len(dirs) == 0 {
		t.Fatal("no fixture has an extra-hardware.json")
	}
	for _, golden := range dirs {
		machine := filepath.Base(filepath.Dir(golden))
		t.Run(machine, func(t *testing.T) {
			b, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			var items [][]any
			if err := json.Unmarshal(b, &items); err != nil {
				t.Fatalf("%s: not a list of lists: %v", golden, err)
			}
			extra := map[string]map[string]map[string]any{}
			for _, it := range items {
				if len(it) != 4 {
					t.Fatalf("item %v is not a 4-tuple", it)
				}
				cat, item, key := it[0].(string), it[1].(string), it[2].(string)
				v := it[3]
				if s, ok := v.(string); ok {
					// Python's int(): an optional sign and digits, spaces around.
					if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
						v = n
					}
				}
				if extra[cat] == nil {
					extra[cat] = map[string]map[string]any{}
				}
				if extra[cat][item] == nil {
					extra[cat][item] = map[string]any{}
				}
				extra[cat][item][key] = v
			}
			doc, _ := json.Marshal(map[string]any{"extra": extra})
			var pd gcinventory.StandardPluginData
			if err := json.Unmarshal(doc, &pd); err != nil {
				t.Fatalf("gophercloud plugin data: %v", err)
			}
			var inv struct {
				SystemVendor struct {
					Firmware struct {
						Vendor, Version string
						BuildDate       string `json:"build_date"`
					} `json:"firmware"`
				} `json:"system_vendor"`
			}
			b, err = os.ReadFile(filepath.Join(filepath.Dir(golden), "inventory.json"))
			if err != nil || json.Unmarshal(b, &inv) != nil {
				t.Fatalf("inventory.json: %v", err)
			}
			bios := pd.Extra.Firmware["bios"]
			vendor, _ := bios["vendor"].(string)
			date, _ := bios["date"].(string)
			if vendor != inv.SystemVendor.Firmware.Vendor || date != inv.SystemVendor.Firmware.BuildDate {
				t.Errorf("extra.firmware.bios = %v; inventory firmware %+v", bios, inv.SystemVendor.Firmware)
			}
			if n, ok := pd.Extra.CPU["logical"]["number"].(float64); !ok || n < 1 {
				t.Errorf("extra.cpu.logical.number = %v", pd.Extra.CPU["logical"]["number"])
			}
		})
	}
}
