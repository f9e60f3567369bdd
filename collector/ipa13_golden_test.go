package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/ipa/ipadiff"
)

// TestFixtureIPA13Golden checks two fixtures against what IPA reported, not
// against the collector's own earlier output: fixtures/qemu-ipa13-bios and
// qemu-ipa13-uefi are the machine e2e/vm's TestVMIPASideBySide boots IPA 13
// and our agent on (qemu.SideBySideMachine, SeaBIOS and OVMF), recorded
// by our ramdisk, and each one's ipa13-inspection.json is what IPA 13
// reported on that machine under that firmware
// (e2e/vm/testdata/ipa13-side-by-side/bios-ipa.json, uefi-ipa.json): the inventory and
// the pci-devices, numa-topology and dmi-decode collectors' data, the
// parts of the inspection data a tree can give. The collectors over the
// tree must give IPA's documents up to the differences the side-by-side
// allow-list explains (the same comparison, internal/testbed/ipa/ipadiff) and those
// of the fixture's own ipa13-differences.json: what the live machine had
// and a recorded tree cannot. Each entry of the fixture's own list must
// still match a difference, so the list shrinks with the gaps.
func TestFixtureIPA13Golden(t *testing.T) {
	for _, fw := range []string{"bios", "uefi"} {
		t.Run(fw, func(t *testing.T) { checkIPA13Golden(t, "qemu-ipa13-"+fw, fw+"-ipa.json") })
	}
}

// checkIPA13Golden compares the fixture name with its ipa13-inspection.json,
// which came from e2e/vm/testdata/ipa13-side-by-side/sideBySide.
func checkIPA13Golden(t *testing.T, name, sideBySide string) {
	ctx := context.Background()
	dir := filepath.Join(fixturesDir, name)
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
	// The golden is IPA's recorded side-by-side document, cut to what a
	// tree can give, and nothing else.
	var recorded map[string]any
	if b, err = os.ReadFile(filepath.Join("../e2e/vm/testdata/ipa13-side-by-side", sideBySide)); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &recorded); err != nil {
		t.Fatal(err)
	}
	for k, v := range ipa.(map[string]any) {
		if !reflect.DeepEqual(v, recorded[k]) {
			t.Errorf("ipa13-inspection.json's %s is not IPA's %s of %s", k, k, sideBySide)
		}
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
