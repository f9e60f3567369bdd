package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/inspect"
	"github.com/ironic-go/ironic-agent/collector"
)

// TestCaptureFixtureCommand records this machine with the command and
// replays the tree with `inventory --root`: the output must equal the
// recorded inventory.json byte for byte, and the inspection collectors that
// read files must give on the tree what they give on this machine.
func TestCaptureFixtureCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "this-machine")
	var stdout, stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"capture-fixture", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("capture-fixture exited %d: %s", code, stderr.String())
	}
	want, err := os.ReadFile(filepath.Join(dir, "inventory.json"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil || !strings.Contains(string(readme), "capture-fixture") {
		t.Errorf("README.md = %q, %v", readme, err)
	}
	stdout.Reset()
	if code := runMain(context.Background(), []string{"inventory", "--root", filepath.Join(dir, "root")}, &stdout, &stderr); code != 0 {
		t.Fatalf("inventory --root exited %d: %s", code, stderr.String())
	}
	if stdout.String() != string(want) {
		t.Errorf("inventory of the captured tree differs from the recorded one:\n%s\nwant:\n%s", stdout.String(), want)
	}
	checkInspectionReplay(t, filepath.Join(dir, "root"))
	// A second capture into the same directory is refused.
	if code := runMain(context.Background(), []string{"capture-fixture", dir}, &stdout, &stderr); code == 0 {
		t.Error("second capture into the same directory succeeded")
	}
	if code := runMain(context.Background(), []string{"capture-fixture"}, &stdout, &stderr); code != 2 {
		t.Errorf("capture-fixture without DIR exited %d, want 2 (usage)", code)
	}
}

// checkInspectionReplay runs the pci-devices and numa-topology inspection
// collectors on this machine and on its captured tree: same data, and no
// collector failure on the tree that the machine did not have.
func checkInspectionReplay(t *testing.T, tree string) {
	t.Helper()
	if _, err := os.Stat("/sys/bus/pci/devices"); err != nil {
		t.Logf("this machine has no /sys/bus/pci/devices (%v): pci-devices is compared as a failure on both", err)
	}
	run := func(root string) map[string]any {
		o := inspect.Options{Collectors: []string{"pci-devices", "numa-topology"}, Root: root,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		return inspect.Collect(context.Background(), o)
	}
	live, replayed := run("/"), run(tree)
	for _, key := range []string{"pci_devices", "numa_topology", "error"} {
		a, _ := json.Marshal(live[key])
		b, _ := json.Marshal(replayed[key])
		if string(a) != string(b) {
			t.Errorf("inspection %s on the captured tree differs from this machine's:\ntree: %s\nlive: %s", key, b, a)
		}
	}
	if devs, _ := live["pci_devices"].([]collector.PCIDevice); len(devs) == 0 {
		t.Logf("this machine lists no PCI devices: the pci-devices comparison is weak")
	}
	// The same through the functions directly, whose errors Collect folds
	// into text (numa-topology's only into a log line).
	ctx := context.Background()
	pl, errl := collector.PCIDevices(ctx, collector.Options{Root: "/"})
	pt, errt := collector.PCIDevices(ctx, collector.Options{Root: tree})
	if !reflect.DeepEqual(pl, pt) || (errl == nil) != (errt == nil) {
		t.Errorf("PCIDevices: tree %+v, %v; live %+v, %v", pt, errt, pl, errl)
	}
	nl, errl := collector.ReadNUMATopology(ctx, collector.Options{Root: "/"})
	nt, errt := collector.ReadNUMATopology(ctx, collector.Options{Root: tree})
	if !reflect.DeepEqual(nl, nt) || (errl == nil) != (errt == nil) {
		t.Errorf("ReadNUMATopology: tree %+v, %v; live %+v, %v", nt, errt, nl, errl)
	}
}
