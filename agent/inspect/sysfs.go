package inspect

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// PCIDevice is one entry of "pci_devices" (IPA 2023.1 keys).
type PCIDevice struct {
	VendorID  string  `json:"vendor_id"`
	ProductID string  `json:"product_id"`
	Class     string  `json:"class"`
	Revision  *string `json:"revision"`
	Bus       string  `json:"bus"`
}

// hexID reads a sysfs id file ("0x8086\n") and returns the part after 'x'.
func hexID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	_, after, ok := strings.Cut(s, "x")
	if !ok {
		return "", fmt.Errorf("%s: %q is not 0x-prefixed", path, s)
	}
	return after, nil
}

// PCIDevices lists /sys/bus/pci/devices below root. Devices whose id files
// cannot be read are skipped (IPA logs and skips them); a missing directory
// is a failure.
func PCIDevices(root string) ([]PCIDevice, error) {
	dir := filepath.Join(root, "sys/bus/pci/devices")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := []PCIDevice{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			continue
		}
		v, err1 := hexID(filepath.Join(p, "vendor"))
		d, err2 := hexID(filepath.Join(p, "device"))
		c, err3 := hexID(filepath.Join(p, "class"))
		if err := errors.Join(err1, err2, err3); err != nil {
			continue
		}
		dev := PCIDevice{VendorID: v, ProductID: d, Class: c, Bus: e.Name()}
		if r, err := hexID(filepath.Join(p, "revision")); err == nil {
			dev.Revision = &r
		}
		out = append(out, dev)
	}
	return out, nil
}

// NUMATopology is "numa_topology".
type NUMATopology struct {
	RAM  []NUMARAM `json:"ram"`
	CPUs []NUMACPU `json:"cpus"`
	NICs []NUMANIC `json:"nics"`
}

// NUMARAM is one node's memory.
type NUMARAM struct {
	NUMANode int   `json:"numa_node"`
	SizeKB   int64 `json:"size_kb"`
}

// NUMACPU is one physical core with its hyper-thread siblings.
type NUMACPU struct {
	CPU            int   `json:"cpu"`
	NUMANode       int   `json:"numa_node"`
	ThreadSiblings []int `json:"thread_siblings"`
}

// NUMANIC is one NIC's node.
type NUMANIC struct {
	Name     string `json:"name"`
	NUMANode int    `json:"numa_node"`
}

// ReadNUMATopology reads /sys/devices/system/node and /sys/class/net below
// root (IPA's numa_inspector). It returns nil, nil when the machine has no
// NUMA sysfs, and an error on data IPA also rejects.
func ReadNUMATopology(root string) (*NUMATopology, error) {
	nodeDir := filepath.Join(root, "sys/devices/system/node")
	ents, err := os.ReadDir(nodeDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	t := &NUMATopology{RAM: []NUMARAM{}, CPUs: []NUMACPU{}, NICs: []NUMANIC{}}
	cpus := map[[2]int]*NUMACPU{} // (node, core id) -> entry
	var keys [][2]int
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "node") {
			continue
		}
		id, err := strconv.Atoi(e.Name()[4:])
		if err != nil {
			continue
		}
		nd := filepath.Join(nodeDir, e.Name())
		mem, err := os.ReadFile(filepath.Join(nd, "meminfo"))
		if err != nil {
			return nil, fmt.Errorf("NUMA node %d: %w", id, err)
		}
		kb, err := memTotalKB(string(mem))
		if err != nil {
			return nil, fmt.Errorf("NUMA node %d: %w", id, err)
		}
		t.RAM = append(t.RAM, NUMARAM{NUMANode: id, SizeKB: kb})
		threads, err := os.ReadDir(nd)
		if err != nil {
			return nil, err
		}
		for _, th := range threads {
			if !strings.HasPrefix(th.Name(), "cpu") {
				continue
			}
			tid, err := strconv.Atoi(th.Name()[3:])
			if err != nil {
				continue // cpumap, cpulist
			}
			coreB, err := os.ReadFile(filepath.Join(nd, th.Name(), "topology/core_id"))
			if err != nil {
				return nil, fmt.Errorf("NUMA node %d cpu %d: %w", id, tid, err)
			}
			core, err := strconv.Atoi(strings.TrimSpace(string(coreB)))
			if err != nil {
				return nil, fmt.Errorf("NUMA node %d cpu %d: bad core_id: %w", id, tid, err)
			}
			k := [2]int{id, core}
			c, ok := cpus[k]
			if !ok {
				c = &NUMACPU{CPU: core, NUMANode: id}
				cpus[k] = c
				keys = append(keys, k)
			}
			c.ThreadSiblings = append(c.ThreadSiblings, tid)
		}
	}
	sort.Slice(t.RAM, func(i, j int) bool { return t.RAM[i].NUMANode < t.RAM[j].NUMANode })
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		c := cpus[k]
		sort.Ints(c.ThreadSiblings)
		t.CPUs = append(t.CPUs, *c)
	}
	netDir := filepath.Join(root, "sys/class/net")
	nics, err := os.ReadDir(netDir)
	if err != nil {
		return nil, fmt.Errorf("NIC list: %w", err)
	}
	for _, n := range nics {
		b, err := os.ReadFile(filepath.Join(netDir, n.Name(), "device/numa_node"))
		if err != nil {
			continue
		}
		id, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("NIC %s: bad numa_node %q", n.Name(), strings.TrimSpace(string(b)))
		}
		t.NICs = append(t.NICs, NUMANIC{Name: n.Name(), NUMANode: id})
	}
	return t, nil
}

// memTotalKB finds "Node N MemTotal: 1234 kB".
func memTotalKB(meminfo string) (int64, error) {
	for _, line := range strings.Split(meminfo, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == "MemTotal:" {
			n, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("bad MemTotal %q", f[3])
			}
			return n, nil
		}
	}
	return 0, errors.New("no MemTotal in meminfo")
}
