package raid

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/inventory/hints"
)

// The inventory lists an md array as IPA does (a disk of lsblk type
// raid1, its whole-disk members still listed: IPA hides only multipath
// paths), and root-device hints can name it, as a deploy onto RAID
// names its root volume.
func TestRootHintsNameAnArray(t *testing.T) {
	b, err := os.ReadFile("../../fixtures/server-sas-md-bond/inventory.json")
	if err != nil {
		t.Fatal(err)
	}
	var inv inventory.Inventory
	if err := json.Unmarshal(b, &inv); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range inv.Disks {
		seen[d.Name] = true
	}
	if !seen["/dev/md0"] || !seen["/dev/sda"] || !seen["/dev/sdb"] {
		t.Fatalf("disks %v: want md0 and its members sda, sdb", seen)
	}
	for _, raw := range []map[string]any{{"name": "/dev/md0"}, {"name": "s== /dev/md0"}, {"size": ">= 1000", "name": "/dev/md0"}} {
		h, err := hints.ParseRootDeviceHints(raw)
		if err != nil {
			t.Fatal(err)
		}
		d, err := hints.ChooseRootDisk(hints.Disks(inv.Disks), h)
		if err != nil || d.Name != "/dev/md0" {
			t.Errorf("hints %v chose %q, %v", raw, d.Name, err)
		}
	}
	// A create plan never takes an array for a holder.
	if got := physicalDisks(inv.Disks); len(got) != len(inv.Disks)-1 {
		t.Errorf("physicalDisks kept %d of %d", len(got), len(inv.Disks))
	}
}
