package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
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
// collector failure on the tree that the machine did not have. A NUMA
// node's memory size is the one thing compared with the captured files
// instead of this machine: a VM's host can resize its memory (balloon,
// hot-plug) between the capture and the live read.
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
		if key == "numa_topology" {
			a, b = withoutNodeMemory(t, a), withoutNodeMemory(t, b)
		}
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
	checkNodeMemory(t, tree, nt)
	if !reflect.DeepEqual(zeroNodeMemory(nl), zeroNodeMemory(nt)) || (errl == nil) != (errt == nil) {
		t.Errorf("ReadNUMATopology (node memory sizes left out): tree %+v, %v; live %+v, %v", nt, errt, nl, errl)
	}
}

// zeroNodeMemory is a copy of topo with every node's memory size 0.
func zeroNodeMemory(topo *collector.NUMATopology) *collector.NUMATopology {
	if topo == nil {
		return nil
	}
	c := *topo
	c.RAM = make([]collector.NUMARAM, len(topo.RAM))
	for i, r := range topo.RAM {
		c.RAM[i] = collector.NUMARAM{NUMANode: r.NUMANode}
	}
	return &c
}

// withoutNodeMemory is the JSON of a numa_topology with every node's
// memory size 0.
func withoutNodeMemory(t *testing.T, b []byte) []byte {
	t.Helper()
	var topo *collector.NUMATopology
	if err := json.Unmarshal(b, &topo); err != nil {
		t.Fatalf("numa_topology %s: %v", b, err)
	}
	out, err := json.Marshal(zeroNodeMemory(topo))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkNodeMemory checks that each node's memory size read on the tree
// is the MemTotal of that node's meminfo in the tree ("Node 0 MemTotal:
// 11495160 kB"): the replay reads the snapshot the capture took.
func checkNodeMemory(t *testing.T, tree string, topo *collector.NUMATopology) {
	t.Helper()
	if topo == nil {
		return
	}
	for _, r := range topo.RAM {
		p := filepath.Join(tree, "sys/devices/system/node", fmt.Sprintf("node%d", r.NUMANode), "meminfo")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("NUMA node %d: %v", r.NUMANode, err)
			continue
		}
		var kb int64 = -1
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 5 && f[2] == "MemTotal:" && f[4] == "kB" {
				kb, _ = strconv.ParseInt(f[3], 10, 64)
			}
		}
		if kb != r.SizeKB {
			t.Errorf("NUMA node %d: %d kB on the tree, want the captured %s's MemTotal (%d kB)", r.NUMANode, r.SizeKB, p, kb)
		}
	}
}
