package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun: the step finds the disk by serial in a fake /sys/block (VPD
// page 0x80 for SCSI, a serial file for virtio), writes the marker there
// only, and reports the device.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	sys, dev := filepath.Join(dir, "sys"), filepath.Join(dir, "dev")
	files := map[string][]byte{
		"sys/vda/serial":             []byte("LAB-VBLK-0001\n"),
		"sys/sda/device/vpd_pg80":    append([]byte{0, 0x80, 0, 13}, "LAB-SCSI-0001"...),
		"sys/sdb/device/vpd_pg80":    append([]byte{0, 0x80, 0, 15}, "LAB-SCSI-0002  "...),
		"sys/sr0/device/vpd_pg80":    {0, 0x80},
		"dev/vda":                    make([]byte, 4096),
		"dev/sda":                    make([]byte, 4096),
		"dev/sdb":                    make([]byte, 4096),
		"sys/nvme0n1/device/serial":  []byte("LAB-NVME-0001"),
		"sys/loop0/queue/rotational": []byte("0"),
	}
	for p, b := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := `{"step": "install_coreos", "node": {"uuid": "u-1", "properties": {"root_device": {"serial": "LAB-SCSI-0002"}}}, "ports": [], "args": {"label": "L"}}`
	var out bytes.Buffer
	if err := run(strings.NewReader(in), &out, sys, dev); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Device string
		Bytes  int
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Device != filepath.Join(dev, "sdb") {
		t.Fatalf("result %q: %v", out.String(), err)
	}
	want := marker("u-1", "L")
	for _, d := range []string{"vda", "sda", "sdb"} {
		b, err := os.ReadFile(filepath.Join(dev, d))
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.HasPrefix(b, want); got != (d == "sdb") {
			t.Errorf("%s holds the marker: %v", d, got)
		}
	}

	for name, bad := range map[string]string{
		"not JSON":   "{",
		"no serial":  `{"node": {"uuid": "u"}}`,
		"no such":    `{"node": {"uuid": "u", "properties": {"root_device": {"serial": "NOPE"}}}}`,
		"wrong type": `{"node": {"uuid": 1}}`,
	} {
		if err := run(strings.NewReader(bad), &out, sys, dev); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
