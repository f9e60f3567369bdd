package inspect

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The sysfs collectors read through an fs.FS rather than absolute paths, so
// capture-fixture can hand them a view of "/" that records every path they
// touch (ReadTree) and the fixture tree answers them as the machine did.

// ReadTree runs the collectors that read files below Options.Root
// (pci-devices, numa-topology) on fsys and drops their results and errors:
// capture-fixture passes its recording view of "/" so a fixture tree also
// answers these collectors. A new collector that reads files belongs here.
func ReadTree(fsys fs.FS) {
	_, _ = PCIDevicesFS(fsys)
	_, _ = NUMATopologyFS(fsys)
}

// hostFS reads the names below a host directory ("" meaning "/"). Unlike
// os.DirFS its errors name the host path (open /sys/bus/pci/devices: ...),
// as the collectors' failure messages should.
type hostFS string

func (h hostFS) path(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return filepath.Join(cmp.Or(string(h), "/"), filepath.FromSlash(name)), nil
}

func (h hostFS) Open(name string) (fs.File, error) {
	p, err := h.path("open", name)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

func (h hostFS) ReadFile(name string) ([]byte, error) {
	p, err := h.path("open", name)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

func (h hostFS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := h.path("open", name)
	if err != nil {
		return nil, err
	}
	return os.ReadDir(p)
}

func (h hostFS) Stat(name string) (fs.FileInfo, error) {
	p, err := h.path("stat", name)
	if err != nil {
		return nil, err
	}
	return os.Stat(p)
}

func (h hostFS) ReadLink(name string) (string, error) {
	p, err := h.path("readlink", name)
	if err != nil {
		return "", err
	}
	return os.Readlink(p)
}

func (h hostFS) Lstat(name string) (fs.FileInfo, error) {
	p, err := h.path("lstat", name)
	if err != nil {
		return nil, err
	}
	return os.Lstat(p)
}

// PCIDevice is one entry of "pci_devices" (IPA 2023.1 keys).
type PCIDevice struct {
	VendorID  string  `json:"vendor_id"`
	ProductID string  `json:"product_id"`
	Class     string  `json:"class"`
	Revision  *string `json:"revision"`
	Bus       string  `json:"bus"`
}

// hexID reads a sysfs id file ("0x8086\n") and returns the part after 'x'.
func hexID(fsys fs.FS, name string) (string, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	_, after, ok := strings.Cut(s, "x")
	if !ok {
		return "", fmt.Errorf("%s: %q is not 0x-prefixed", name, s)
	}
	return after, nil
}

// PCIDevices lists /sys/bus/pci/devices below root. Devices whose id files
// cannot be read are skipped (IPA logs and skips them); a missing directory
// is a failure.
func PCIDevices(root string) ([]PCIDevice, error) {
	return PCIDevicesFS(hostFS(root))
}

// PCIDevicesFS is PCIDevices on fsys, whose root is the machine's "/".
func PCIDevicesFS(fsys fs.FS) ([]PCIDevice, error) {
	const dir = "sys/bus/pci/devices"
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	out := []PCIDevice{}
	for _, e := range ents {
		p := path.Join(dir, e.Name())
		if fi, err := fs.Stat(fsys, p); err != nil || !fi.IsDir() {
			continue
		}
		v, err1 := hexID(fsys, path.Join(p, "vendor"))
		d, err2 := hexID(fsys, path.Join(p, "device"))
		c, err3 := hexID(fsys, path.Join(p, "class"))
		if err := errors.Join(err1, err2, err3); err != nil {
			continue
		}
		dev := PCIDevice{VendorID: v, ProductID: d, Class: c, Bus: e.Name()}
		if r, err := hexID(fsys, path.Join(p, "revision")); err == nil {
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
	return NUMATopologyFS(hostFS(root))
}

// NUMATopologyFS is ReadNUMATopology on fsys, whose root is the machine's "/".
func NUMATopologyFS(fsys fs.FS) (*NUMATopology, error) {
	const nodeDir = "sys/devices/system/node"
	ents, err := fs.ReadDir(fsys, nodeDir)
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
		if !strings.HasPrefix(e.Name(), "node") {
			continue
		}
		id, err := strconv.Atoi(e.Name()[4:])
		if err != nil {
			continue
		}
		nd := path.Join(nodeDir, e.Name())
		mem, err := fs.ReadFile(fsys, path.Join(nd, "meminfo"))
		if err != nil {
			return nil, fmt.Errorf("NUMA node %d: %w", id, err)
		}
		kb, err := memTotalKB(string(mem))
		if err != nil {
			return nil, fmt.Errorf("NUMA node %d: %w", id, err)
		}
		t.RAM = append(t.RAM, NUMARAM{NUMANode: id, SizeKB: kb})
		threads, err := fs.ReadDir(fsys, nd)
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
			coreB, err := fs.ReadFile(fsys, path.Join(nd, th.Name(), "topology/core_id"))
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
	nics, err := fs.ReadDir(fsys, netDir)
	if err != nil {
		return nil, fmt.Errorf("NIC list: %w", err)
	}
	for _, n := range nics {
		b, err := fs.ReadFile(fsys, path.Join(netDir, n.Name(), "device/numa_node"))
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
