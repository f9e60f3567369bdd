package hints

import (
	"encoding/json"
	"testing"

	"github.com/ironic-go/ironic-agent/inventory"
)

// FuzzRootDeviceHints feeds hint documents as a node would carry them
// (JSON) through parsing and matching: errors are fine, panics are not.
func FuzzRootDeviceHints(f *testing.F) {
	for _, s := range []string{
		`{"model": "FOO model", "size": 12345, "rotational": "yes"}`,
		`{"name": "<or> /dev/sda <or> /dev/sdb", "size": ">= 10"}`,
		`{"size": "<range-in> [ 10 20 ]"}`,
		`{"serial": "<all-in> a b", "wwn": "s!= x"}`,
		`{"hctl": "s== 1:0:0:0", "by_path": "<in> pci"}`,
		`{"size": "<or> 1 <or> 2", "tran": "s>= nvme"}`,
		`{"model": "== 1e3"}`,
		`{"bogus": 1}`,
	} {
		f.Add([]byte(s))
	}
	disks := ipaDevices()
	disks = append(disks, Disk{Disk: inventory.Disk{Name: "/dev/nvme0n1", Size: 1 << 40, Model: sp("10"), HCTL: sp("")}})
	f.Fuzz(func(t *testing.T, doc []byte) {
		var raw map[string]any
		if json.Unmarshal(doc, &raw) != nil {
			return
		}
		h, err := ParseRootDeviceHints(raw)
		if err != nil {
			if h != nil {
				t.Fatalf("error %v with a result", err)
			}
			return
		}
		_ = h.String()
		_, _ = FindDisksByHints(disks, h)
		_, _ = ChooseRootDisk(disks, h)
	})
}

// FuzzSpecMatch checks the specs grammar on arbitrary specs and values.
func FuzzSpecMatch(f *testing.F) {
	for _, s := range []string{"s== a", "<or> a <or> b", "<range-in> ( 1 2 ]", "<all-in> x y", ">= 1e3", "<in> x", "=", "< range-in>"} {
		f.Add(s, "a", 1.5, false)
	}
	f.Fuzz(func(t *testing.T, spec, s string, n float64, isNum bool) {
		_, _ = specMatch(specValue{isNum: isNum, num: n, str: s}, spec)
		_, _, _ = extractHintOperatorAndValues(spec, "x")
		_, _ = normalizeHintExpression(spec, "x")
	})
}
