package collector

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// inspectionTree is a small machine as sysfs lays it out: PCI devices
// behind links, one of them garbled, and one NUMA node with three threads
// on two cores.
func inspectionTree(t *testing.T) string {
	return tree(t, map[string]string{
		"sys/bus/pci/devices/0000:03:00.0":                    "-> ../../../devices/pci0000:00/0000:03:00.0",
		"sys/devices/pci0000:00/0000:03:00.0/vendor":          "0x8086\n",
		"sys/devices/pci0000:00/0000:03:00.0/device":          "0x1521\n",
		"sys/devices/pci0000:00/0000:03:00.0/class":           "0x020000\n",
		"sys/devices/pci0000:00/0000:03:00.0/revision":        "0x01\n",
		"sys/devices/pci0000:00/0000:03:00.0/numa_node":       "1\n",
		"sys/bus/pci/devices/0000:00:1f.0/numa_node":          "-1\n",
		"sys/bus/pci/devices/0000:00:1f.0/vendor":             "0x8086\n",
		"sys/bus/pci/devices/0000:00:1f.0/device":             "0x2918\n",
		"sys/bus/pci/devices/0000:00:1f.0/class":              "0x060100x7\n",
		"sys/bus/pci/devices/0000:00:02.0/vendor":             "garbage\n",
		"sys/bus/pci/devices/.gitkeep":                        "",
		"sys/devices/system/node/node0/meminfo":               "Node 0 MemTotal:        8192 kB\nNode 0 MemFree: 1 kB\n",
		"sys/devices/system/node/node0/cpu0/topology/core_id": "0\n",
		"sys/devices/system/node/node0/cpu2/topology/core_id": "0\n",
		"sys/devices/system/node/node0/cpu1/topology/core_id": "1\n",
		"sys/devices/system/node/node0/cpulist":               "0-2\n",
		"sys/devices/system/node/has_cpu":                     "0\n",
		"sys/class/net/eth0/device/numa_node":                 "0\n",
		"sys/class/net/lo/addr_len":                           "6\n",
	})
}

// TestInspectionUnits checks both readers on a tree, in IPA's JSON shapes.
func TestInspectionUnits(t *testing.T) {
	ctx := context.Background()
	opts := Options{Root: inspectionTree(t)}
	devs, err := PCIDevices(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(devs)
	if want := `[{"vendor_id":"8086","product_id":"2918","class":"060100","revision":null,"bus":"0000:00:1f.0","numa_node_id":"-1"},` +
		`{"vendor_id":"8086","product_id":"1521","class":"020000","revision":"01","bus":"0000:03:00.0","numa_node_id":"1"}]`; string(b) != want {
		t.Errorf("pci_devices = %s\nwant %s", b, want)
	}
	topo, err := ReadNUMATopology(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(topo)
	if want := `{"ram":[{"numa_node":0,"size_kb":8192}],"cpus":[{"cpu":0,"numa_node":0,"thread_siblings":[0,2]},` +
		`{"cpu":1,"numa_node":0,"thread_siblings":[1]}],"nics":[{"name":"eth0","numa_node":0}]}`; string(b) != want {
		t.Errorf("numa_topology = %s\nwant %s", b, want)
	}

	// No NUMA sysfs is no error: IPA reports nothing.
	if topo, err := ReadNUMATopology(ctx, Options{Root: t.TempDir()}); topo != nil || err != nil {
		t.Errorf("ReadNUMATopology without NUMA sysfs = %+v, %v; want nil, nil", topo, err)
	}
}

// TestInspectionUnitErrorsNameTheFile: a failure names the host file, as
// IPA's inspection "error" text and the agent's warning pass it on.
func TestInspectionUnitErrorsNameTheFile(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	_, err := PCIDevices(ctx, Options{Root: root})
	if want := filepath.Join(root, "sys/bus/pci/devices"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("PCIDevices on an empty root: %v, want an error naming %s", err, want)
	}
	root = tree(t, map[string]string{"sys/devices/system/node/node0/cpulist": "0\n"})
	_, err = ReadNUMATopology(ctx, Options{Root: root})
	if want := filepath.Join(root, "sys/devices/system/node/node0/meminfo"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ReadNUMATopology without meminfo: %v, want an error naming %s", err, want)
	}
	root = tree(t, map[string]string{
		"sys/devices/system/node/node0/meminfo":               "Node 0 MemTotal: 1 kB\n",
		"sys/devices/system/node/node0/cpu0/topology/core_id": "x\n",
	})
	if _, err = ReadNUMATopology(ctx, Options{Root: root}); err == nil || !strings.Contains(err.Error(), "NUMA node 0 cpu 0: bad core_id") {
		t.Errorf("ReadNUMATopology with a garbled core_id: %v", err)
	}
}
