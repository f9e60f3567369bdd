package vm

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// checkInventory compares an IPA-format inventory (as JSON decoded into
// maps, the way inspector returns it) with what QEMU was told.
func checkInventory(t *testing.T, inv map[string]any, m qemu.Machine) {
	t.Helper()
	get := func(v any, path ...string) any {
		for _, p := range path {
			mm, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = mm[p]
		}
		return v
	}
	eq := func(what string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	sv := m.SMBIOS
	eq("system_vendor.manufacturer", get(inv, "system_vendor", "manufacturer"), sv.SystemManufacturer)
	// IPA takes the product from lshw, which appends the SKU.
	product := sv.SystemProduct
	if sv.SKU != "" {
		product += " (" + sv.SKU + ")"
	}
	eq("system_vendor.product_name", get(inv, "system_vendor", "product_name"), product)
	eq("system_vendor.serial_number", get(inv, "system_vendor", "serial_number"), sv.SystemSerial)
	eq("system_vendor.firmware.vendor", get(inv, "system_vendor", "firmware", "vendor"), sv.BIOSVendor)
	eq("system_vendor.firmware.version", get(inv, "system_vendor", "firmware", "version"), sv.BIOSVersion)
	eq("cpu.count", get(inv, "cpu", "count"), m.CPUs)
	model, arch := m.CPUModel, "x86_64"
	if m.Arch == qemu.Arm64 {
		// lscpu's name of the core's MIDR, QEMU's CPU type being no
		// model name.
		model, arch = "Cortex-A57", "aarch64"
	}
	eq("cpu.model_name", get(inv, "cpu", "model_name"), model)
	eq("cpu.architecture", get(inv, "cpu", "architecture"), arch)
	eq("memory.physical_mb", get(inv, "memory", "physical_mb"), m.MemoryMB)
	if total, _ := get(inv, "memory", "total").(float64); total < float64(m.MemoryMB)*0.8*(1<<20) || total > float64(m.MemoryMB)*(1<<20) {
		t.Errorf("memory.total = %v, want a little under %d MiB", total, m.MemoryMB)
	}
	eq("boot.current_boot_mode", get(inv, "boot", "current_boot_mode"), m.Firmware)

	disks, _ := get(inv, "disks").([]any)
	bySerial := map[string]map[string]any{}
	for _, d := range disks {
		if dm, ok := d.(map[string]any); ok {
			if s, ok := dm["serial"].(string); ok {
				bySerial[s] = dm
			}
		}
	}
	if len(disks) != len(m.Disks) {
		t.Errorf("%d disks in the inventory, want %d: %v", len(disks), len(m.Disks), keys(bySerial))
	}
	for _, d := range m.Disks {
		got := bySerial[d.Serial]
		if got == nil {
			t.Errorf("no disk with serial %s (%s); serials: %v", d.Serial, d.Kind, keys(bySerial))
			continue
		}
		eq(d.ID+" size", got["size"], float64(d.SizeMB<<20))
		if d.WWN != "" {
			eq(d.ID+" wwn", got["wwn"], d.WWN)
		}
		switch d.Kind {
		case "scsi-hd":
			// QEMU sets channel, target and LUN; the host number is the
			// kernel's, in the order the HBA drivers came up.
			if h, _ := got["hctl"].(string); !strings.HasSuffix(h, fmt.Sprintf(":0:%d:%d", d.SCSITarget, d.SCSILun)) {
				t.Errorf("%s hctl = %q, want H:0:%d:%d", d.ID, h, d.SCSITarget, d.SCSILun)
			}
			eq(d.ID+" vendor", got["vendor"], d.Vendor)
			eq(d.ID+" model", got["model"], d.Model)
			eq(d.ID+" rotational", got["rotational"], d.RotationRate != 1)
		case "ide-hd":
			eq(d.ID+" model", got["model"], d.Model)
			eq(d.ID+" rotational", got["rotational"], d.RotationRate != 1)
		case "nvme":
			eq(d.ID+" rotational", got["rotational"], false)
			if n, _ := got["name"].(string); !strings.HasPrefix(n, "/dev/nvme") {
				t.Errorf("%s name = %q", d.ID, n)
			}
		case "virtio-blk":
			eq(d.ID+" name", got["name"], "/dev/vda")
		}
	}

	ifaces, _ := get(inv, "interfaces").([]any)
	macs := map[string]map[string]any{}
	for _, i := range ifaces {
		if im, ok := i.(map[string]any); ok {
			macs[fmt.Sprint(im["mac_address"])] = im
		}
	}
	for _, n := range m.NICs {
		if macs[n.MAC] == nil {
			t.Errorf("no interface with MAC %s; have %v", n.MAC, keys(macs))
		}
	}
}

// lldpSystemName returns the System Name TLV (type 5) the interface with
// mac reported, from IPA's raw [type, hex value] pairs.
func lldpSystemName(inv map[string]any, mac string) (string, error) {
	ifaces, _ := inv["interfaces"].([]any)
	for _, i := range ifaces {
		im, _ := i.(map[string]any)
		if im == nil || im["mac_address"] != mac {
			continue
		}
		tlvs, _ := im["lldp"].([]any)
		for _, tlv := range tlvs {
			pair, _ := tlv.([]any)
			if len(pair) != 2 {
				continue
			}
			if typ, _ := pair[0].(float64); typ == 5 {
				b, err := hex.DecodeString(fmt.Sprint(pair[1]))
				return string(b), err
			}
		}
		b, _ := json.Marshal(im["lldp"])
		return "", fmt.Errorf("interface %s has no System Name TLV: lldp = %s", mac, b)
	}
	return "", fmt.Errorf("no interface %s", mac)
}

func keys[V any](m map[string]V) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	return k
}
