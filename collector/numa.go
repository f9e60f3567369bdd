package collector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// NUMATopology is the inspection data's "numa_topology" (IPA's
// numa_inspector).
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

// ReadNUMATopology reads sys/devices/system/node and sys/class/net below
// opts.Root as IPA's numa-topology inspection collector does. It returns
// nil, nil when the machine has no NUMA sysfs, and an error on data IPA
// also rejects.
func ReadNUMATopology(ctx context.Context, opts Options) (*NUMATopology, error) {
	return numaTopology(ctx, opts.fs())
}

// collectNUMATopology is the numa_topology unit (see inspectionUnits).
func collectNUMATopology(ctx context.Context, c *collection) error {
	_, err := numaTopology(ctx, c.fs)
	return err
}

func numaTopology(ctx context.Context, f rootFS) (*NUMATopology, error) {
	const nodeDir = "sys/devices/system/node"
	ents, err := f.ReadDir(nodeDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	t := &NUMATopology{RAM: []NUMARAM{}, CPUs: []NUMACPU{}, NICs: []NUMANIC{}}
	cpus := map[[2]int]*NUMACPU{} // (node, core id) -> entry
	var keys [][2]int
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(e.Name(), "node") {
			continue
		}
		id, err := strconv.Atoi(e.Name()[4:])
		if err != nil {
			continue
		}
		nd := path.Join(nodeDir, e.Name())
		mem, err := f.ReadFile(path.Join(nd, "meminfo"))
		if err != nil {
			return nil, fmt.Errorf("NUMA node %d: %w", id, err)
		}
		kb, err := memTotalKB(string(mem))
		if err != nil {
			return nil, fmt.Errorf("NUMA node %d: %w", id, err)
		}
		t.RAM = append(t.RAM, NUMARAM{NUMANode: id, SizeKB: kb})
		threads, err := f.ReadDir(nd)
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
			coreB, err := f.ReadFile(path.Join(nd, th.Name(), "topology/core_id"))
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
	const netDir = "sys/class/net"
	nics, err := f.ReadDir(netDir)
	if err != nil {
		return nil, fmt.Errorf("NIC list: %w", err)
	}
	for _, n := range nics {
		b, err := f.ReadFile(path.Join(netDir, n.Name(), "device/numa_node"))
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

// memTotalKB finds "Node N MemTotal: 1234 kB" in a node's meminfo.
func memTotalKB(meminfo string) (int64, error) {
	for line := range strings.SplitSeq(meminfo, "\n") {
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
