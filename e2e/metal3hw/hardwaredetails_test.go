package metal3hw

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

var update = flag.Bool("update", false, "rewrite the golden HardwareDetails in testdata")

// errLogger records what the conversion logs.
type errLogger struct{ errs []error }

func (l *errLogger) Error(err error, msg string, _ ...any) {
	l.errs = append(l.errs, errors.Join(errors.New(msg), err))
}

// decode reads a GET /v1/nodes/{node}/inventory reply as
// baremetal-operator's Ironic provisioner does: with gophercloud's
// InventoryResult.
func decode(t testing.TB, raw []byte) (*nodes.InventoryData, error) {
	t.Helper()
	var r nodes.InventoryResult
	if err := json.Unmarshal(raw, &r.Body); err != nil {
		return nil, err
	}
	return r.Extract()
}

// TestRecordedVM converts what Ironic 35.0 stored for the agent in
// e2e/vm's TestVMMetal3Lifecycle (SeaBIOS, six disks, a virtio NIC and an
// e1000 behind lldpd) and compares it with the golden HardwareDetails.
func TestRecordedVM(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "ironic-35.0-vm-bios.json"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := decode(t, raw)
	if err != nil {
		t.Fatalf("gophercloud cannot decode the recorded inventory: %v", err)
	}
	var log errLogger
	d := GetHardwareDetails(data, &log)
	if len(log.errs) > 0 {
		t.Errorf("the conversion logged errors: %v", log.errs)
	}
	got, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "ironic-35.0-vm-bios.hardwaredetails.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("HardwareDetails differ from %s (go test -update rewrites it):\n%s", golden, got)
	}

	// What the golden file must show, said once more in words.
	var lldp *LLDP
	for _, n := range d.NIC {
		if n.MAC == "52:54:00:6d:0a:02" {
			lldp = n.LLDP
		}
		if n.MAC == "52:54:00:6d:0a:01" && (!n.PXE || n.IP != "10.0.2.15") {
			t.Errorf("boot NIC: pxe %v, ip %q; want true, 10.0.2.15", n.PXE, n.IP)
		}
	}
	if lldp == nil || lldp.SwitchSystemName != "metal3-switch-1" || lldp.PortID != "Ethernet1/9" || lldp.SwitchID != "02:11:22:33:44:66" {
		t.Errorf("LLDP of the e1000 = %+v, want lldpd's metal3-switch-1, Ethernet1/9, 02:11:22:33:44:66", lldp)
	}
	if len(d.Storage) != 6 || d.RAMMebibytes != 1024 || d.CPU.Count != 2 || d.Firmware.BIOS.Vendor != "LabBIOS Inc." {
		t.Errorf("storage %d, RAM %d MiB, %d CPUs, BIOS vendor %q; want 6, 1024, 2, LabBIOS Inc.",
			len(d.Storage), d.RAMMebibytes, d.CPU.Count, d.Firmware.BIOS.Vendor)
	}
}

// FuzzGetHardwareDetails feeds inventory replies to gophercloud's decoder
// and, when it accepts one, to the conversion, which must not panic on
// what an agent could have sent.
func FuzzGetHardwareDetails(f *testing.F) {
	raw, err := os.ReadFile(filepath.Join("testdata", "ironic-35.0-vm-bios.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add([]byte(`{"inventory": {}, "plugin_data": {"parsed_lldp": {"eth0": {"switch_port_vlans": [{"id": 1}]}}}}`))
	f.Add([]byte(`{"inventory": {"interfaces": [{"name": "eth0", "ipv6_address": "fe80::1"}]}, "plugin_data": []}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		data, err := decode(t, b)
		if err != nil || data == nil {
			return
		}
		GetHardwareDetails(data, &errLogger{})
	})
}
