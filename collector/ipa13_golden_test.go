package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/ipadiff"
)

// TestFixtureIPA13Golden checks a fixture against what IPA reported, not
// against the collector's own earlier output: fixtures/qemu-ipa13-bios is
// the machine e2e/vm's TestVMIPASideBySide boots IPA 13 and our agent on
// (vmtest.SideBySideMachine, SeaBIOS), recorded by our ramdisk, and its
// ipa13-inspection.json is what IPA 13 reported on that machine
// (e2e/vm/testdata/ipa13-side-by-side/bios-ipa.json): the inventory and
// the pci-devices, numa-topology and dmi-decode collectors' data, the
// parts of the inspection data a tree can give. The collectors over the
// tree must give IPA's documents up to the differences the side-by-side
// allow-list explains (the same comparison, internal/ipadiff) and those
// of the fixture's own ipa13-differences.json: what the live machine had
// and a recorded tree cannot. Each entry of the fixture's own list must
// still match a difference, so the list shrinks with the gaps.
func TestFixtureIPA13Golden(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(fixturesDir, "qemu-ipa13-bios")
	own, err := ipadiff.LoadAllowList(filepath.Join(dir, "ipa13-differences.json"))
	if err != nil {
		t.Fatal(err)
	}
	side, err := ipadiff.LoadAllowList("../e2e/vm/testdata/ipa13-differences.json")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Root: filepath.Join(dir, "root"), Logger: testLogger(t)}
	inv, err := Collect(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, inv); err != nil {
		t.Fatal(err)
	}
	var inventory any
	if err := json.Unmarshal(buf.Bytes(), &inventory); err != nil {
		t.Fatal(err)
	}
	pci, err := PCIDevices(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	numa, err := ReadNUMATopology(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	dmi, err := DMIDecode(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Through JSON, as Ironic stored IPA's: the comparison is of decoded
	// documents.
	b, err := json.Marshal(map[string]any{"inventory": inventory, "pci_devices": pci, "numa_topology": numa, "dmi": dmi})
	if err != nil {
		t.Fatal(err)
	}
	var ours, ipa any
	if err := json.Unmarshal(b, &ours); err != nil {
		t.Fatal(err)
	}
	b, err = os.ReadFile(filepath.Join(dir, "ipa13-inspection.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ipa); err != nil {
		t.Fatalf("ipa13-inspection.json: %v", err)
	}
	// The fixture's own reasons come first: they say why the recorded tree,
	// not our agent, differs.
	allowed := ipadiff.Check(t, "", ipa, ours, append(own, side...), true)
	for _, a := range own {
		if len(allowed[a.Path]) == 0 {
			t.Errorf("ipa13-differences.json: entry %q matches no difference: remove it", a.Path)
		}
	}
}
