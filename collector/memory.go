package collector

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/ironic-go/ironic-agent/inventory"
)

// collectMemory fills memory.total (MemTotal, what psutil reports to IPA)
// and memory.physical_mb (installed RAM, which IPA takes from lshw's SMBIOS
// memory devices and Metal3 shows as the host's RAM).
func collectMemory(ctx context.Context, c *collection) error {
	var errs []error
	if total, err := c.memTotal(); err != nil {
		errs = append(errs, err)
	} else {
		c.inv.Memory.Total = inventory.Ptr(total)
	}
	mb, err := c.physicalMB()
	if err != nil {
		errs = append(errs, err)
	}
	c.inv.Memory.PhysicalMB = mb
	return errors.Join(errs...)
}

// memTotal returns MemTotal from proc/meminfo in bytes.
func (c *collection) memTotal() (int64, error) {
	b, err := c.fs.ReadFile("proc/meminfo")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemTotal" {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 2 && f[1] == "kB" {
			if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb >= 0 && kb < 1<<53 {
				return kb * 1024, nil
			}
		}
		return 0, fmt.Errorf("%s: MemTotal %q is not \"<n> kB\"", c.fs.Path("proc/meminfo"), strings.TrimSpace(v))
	}
	return 0, fmt.Errorf("%s: no MemTotal line", c.fs.Path("proc/meminfo"))
}

// physicalMB sums the SMBIOS type 17 memory devices in MiB. Machines
// without an SMBIOS table (many VMs, Firecracker, some arm64 boards) fall
// back to the memory hotplug blocks the kernel has online, which is also
// lshw's fallback; nil when neither source is there.
func (c *collection) physicalMB() (*int64, error) {
	si, err := c.smbiosTable()
	if err != nil {
		c.warn("memory", err)
	}
	if si != nil {
		if b, ok := si.memoryDeviceBytes(); ok {
			return inventory.Ptr(int64(b >> 20)), nil
		}
	}
	b, err := c.blockBytes()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	return inventory.Ptr(int64(b >> 20)), nil
}

// blockCount is memoryBlockBytes' answer.
type blockCount struct {
	bytes uint64
	err   error
}

// prefetchMemoryBlocks starts counting the online memory blocks beside
// the units that run before memory's, on a machine without an SMBIOS
// table, whose physical_mb they give: one small sysfs file per block,
// hundreds of opens that would otherwise be most of the collection's
// time.
func (c *collection) prefetchMemoryBlocks() {
	if c.fs.Exists(smbiosTablePath) {
		return
	}
	ch := make(chan blockCount, 1)
	c.memBlocks = ch
	go func() {
		var r blockCount
		defer func() {
			if p := recover(); p != nil {
				r = blockCount{err: fmt.Errorf("reading the memory blocks: panic: %v", p)}
			}
			ch <- r
		}()
		r.bytes, r.err = c.memoryBlockBytes()
	}()
}

// blockBytes is memoryBlockBytes' answer, prefetched or read now.
func (c *collection) blockBytes() (uint64, error) {
	if c.memBlocks != nil {
		r := <-c.memBlocks
		c.memBlocks = nil
		return r.bytes, r.err
	}
	return c.memoryBlockBytes()
}

// isMemoryBlock matches the block directories, memory<N>.
func isMemoryBlock(name string) bool {
	n, ok := strings.CutPrefix(name, "memory")
	if !ok || n == "" {
		return false
	}
	_, err := strconv.ParseUint(n, 10, 32)
	return err == nil
}

// memoryBlockBytes is the number of online memory blocks times the block
// size, from /sys/devices/system/memory.
func (c *collection) memoryBlockBytes() (uint64, error) {
	const dir = "sys/devices/system/memory"
	s, err := c.fs.ReadString(dir + "/block_size_bytes")
	if err != nil {
		return 0, err
	}
	size, err := strconv.ParseUint(s, 16, 64)
	if err != nil || size == 0 {
		return 0, fmt.Errorf("%s: block size %q is not a hex number", c.fs.Path(dir+"/block_size_bytes"), s)
	}
	entries, err := c.fs.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var online uint64
	// One buffer for every block: a machine without SMBIOS may have
	// hundreds of blocks, each a "state" of a few bytes.
	var buf [64]byte
	for _, e := range entries {
		if !isMemoryBlock(e.Name()) {
			continue
		}
		st, err := c.fs.ReadAttr(dir+"/"+e.Name()+"/state", buf[:])
		if err != nil {
			c.warn("memory", err)
			continue
		}
		if st == "online" {
			online++
		}
	}
	if online == 0 {
		return 0, fmt.Errorf("%s: no online memory block", c.fs.Path(dir))
	}
	return online * size, nil
}
