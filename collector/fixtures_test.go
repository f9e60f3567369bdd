package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/ironic-go/ironic-agent/bmc"
)

var update = flag.Bool("update", false, "rewrite the fixtures' inventory.json from their trees")

// fixturesDir holds one directory per recorded machine:
// fixtures/<machine>/{root/,inventory.json,README.md}.
const fixturesDir = "../fixtures"

// fixtureMachines lists the fixture directories that have a root tree.
func fixtureMachines(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(fixturesDir)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if fi, err := os.Stat(filepath.Join(fixturesDir, e.Name(), "root")); err == nil && fi.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) == 0 {
		t.Fatalf("no fixture trees in %s", fixturesDir)
	}
	return dirs
}

// TestFixturesGolden collects every fixture tree and compares with its
// inventory.json; go test -run TestFixturesGolden -update rewrites them.
func TestFixturesGolden(t *testing.T) {
	for _, m := range fixtureMachines(t) {
		t.Run(m, func(t *testing.T) {
			dir := filepath.Join(fixturesDir, m)
			opts := Options{Root: filepath.Join(dir, "root"), Logger: testLogger(t)}
			// Recorded BMC replies, if the machine had an IPMI device.
			if r, err := bmc.LoadReplay(filepath.Join(dir, "ipmi.json")); err == nil {
				opts.IPMI = r
			} else if !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			inv, err := Collect(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := WriteJSON(&got, inv); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join(dir, "inventory.json"), got.Bytes(), "TestFixturesGolden")
		})
	}
}

// TestFixturesUdevAndSysfsAgree: the ramdisk runs no udevd, so every disk
// value must come out the same whether udev's database and by-path links
// are read (when the fixture has them) or derived from sysfs alone.
func TestFixturesUdevAndSysfsAgree(t *testing.T) {
	for _, m := range fixtureMachines(t) {
		t.Run(m, func(t *testing.T) {
			root := filepath.Join(fixturesDir, m, "root")
			withUdev, err := Disks(context.Background(), Options{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			sysfsOnly, err := Disks(context.Background(), Options{Root: root, IgnoreUdev: true})
			if err != nil {
				t.Fatal(err)
			}
			a, _ := json.MarshalIndent(withUdev, "", "  ")
			b, _ := json.MarshalIndent(sysfsOnly, "", "  ")
			if !bytes.Equal(a, b) {
				t.Errorf("udev and sysfs routes differ:\n%s", lineDiff(string(a), string(b)))
			}
		})
	}
}

// TestFixturesPCIAndNUMAGolden compares what IPA's pci-devices and
// numa-topology inspection collectors report for a fixture tree with its
// pci_devices.json and numa_topology.json. Trees recorded before
// capture-fixture copied PCI and NUMA sysfs have neither file; -update
// writes each file the tree can answer.
func TestFixturesPCIAndNUMAGolden(t *testing.T) {
	ctx := context.Background()
	for _, m := range fixtureMachines(t) {
		t.Run(m, func(t *testing.T) {
			dir := filepath.Join(fixturesDir, m)
			opts := Options{Root: filepath.Join(dir, "root")}
			pci, err := PCIDevices(ctx, opts)
			checkInspectionGolden(t, filepath.Join(dir, "pci_devices.json"), pci, err == nil, err)
			topo, err := ReadNUMATopology(ctx, opts)
			checkInspectionGolden(t, filepath.Join(dir, "numa_topology.json"), topo, err == nil && topo != nil, err)
		})
	}
}

// checkInspectionGolden checks one inspection document against its golden
// file; ok says whether the tree answered (err is why not).
func checkInspectionGolden(t *testing.T, golden string, v any, ok bool, err error) {
	t.Helper()
	_, statErr := os.Stat(golden)
	switch {
	case ok:
		checkJSONGolden(t, golden, v)
	case statErr == nil:
		t.Errorf("%s exists but the tree gives no document: %v", golden, err)
	}
}

// checkJSONGolden compares v, indented, with the golden file (or writes it
// under -update).
func checkJSONGolden(t *testing.T, golden string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./collector -run TestFixturesInspectionGolden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n%s", golden, lineDiff(string(want), string(got)))
	}
}
