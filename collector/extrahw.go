package collector

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/ironic-go/ironic-agent/collector/internal/dmidecode"
	"github.com/ironic-go/ironic-agent/collector/internal/udev"
	"github.com/ironic-go/ironic-agent/inventory"
)

// HardwareItem is one [category, item, key, value] entry of python-hardware's
// list (`hardware-detect`'s output), which IPA's extra-hardware collector
// sends as "data" and Ironic's extra-hardware hook turns into
// extra[category][item][key]. Value is a string or a number, as
// hardware-detect types it (the hook converts numeric strings anyway).
type HardwareItem struct {
	Category, Item, Key string
	Value               any
}

// MarshalJSON writes the 4-element list.
func (h HardwareItem) MarshalJSON() ([]byte, error) {
	return json.Marshal([4]any{h.Category, h.Item, h.Key, h.Value})
}

// ExtraHardware builds python-hardware's list for the categories it
// fills from sysfs, procfs and SMBIOS, in hardware-detect's order:
//
//   - disk (diskinfo.py): logical/count, and per sd*, hd*, vd* and nvme*
//     block device of non-zero size: size (GB, 10^9), vendor, model,
//     rev/revision, optimal_io_size, physical_block_size, rotational,
//     nr_requests, scheduler, Write Cache Enable / Read Cache Disable
//     (SCSI disks), and the /dev/disk/by-id names (id, wwn-id, scsi-id)
//     when udev made them.
//   - system (system.py, which reads `lshw -xml`): product serial, name,
//     vendor, version and uuid (dmidecode's text), motherboard name,
//     vendor, version and serial, with the serial quirk fix of TYAN and
//     Supermicro boards; firmware/bios version, date, vendor;
//     memory/total/size (bytes, as physical_mb); per NIC of the inventory: businfo,
//     ipv4, link, driver, serial (the MAC).
//   - cpu (from lscpu's values): physical number, smt, per socket boost,
//     vendor, product, cores, threads, family, model, stepping,
//     architecture, min_Mhz, max_Mhz, flags, threads_per_core; logical
//     number and per-CPU governor; numa nodes count and per node
//     cpu_count. vendor, family, model and stepping come from x86's
//     /proc/cpuinfo; arm64's (lscpu's MIDR names) are left out.
//   - system kernel version, arch and cmdline.
//
// Not produced, because only external programs know them: RAID
// controllers (areca, hpacucli, megacli), SMART data (smartctl), the
// memory banks and NIC names, speeds, firmware and offloads (lshw's
// pci.ids and ethtool), IPv4 netmasks, LLDP (lldptool), IPMI and sensors
// (ipmitool), InfiniBand (ibstat), os vendor and version (lsb_release),
// CPU caches, the current MHz and NUMA CPU masks (lscpu's formats), the
// RTC, auxv and AHCI flags, and the benchmarks. inv is the inventory
// already collected (nil: collect it).
func ExtraHardware(ctx context.Context, opts Options, inv *inventory.Inventory) ([]HardwareItem, error) {
	if inv == nil {
		var err error
		if inv, err = Collect(ctx, opts); err != nil {
			return nil, err
		}
	}
	c := &collection{opts: opts, fs: opts.fs(), log: opts.logger(), inv: inv}
	return extraHardware(ctx, c)
}

// collectExtraHardware is the extra_hardware unit (see inspectionUnits).
func collectExtraHardware(ctx context.Context, c *collection) error {
	_, err := extraHardware(ctx, c)
	return err
}

// hwList accumulates the entries.
type hwList []HardwareItem

func (l *hwList) add(category, item, key string, value any) {
	*l = append(*l, HardwareItem{category, item, key, value})
}

// addString adds a string value unless it is empty, as lshw omits empty
// elements and hardware-detect then adds nothing.
func (l *hwList) addString(category, item, key, value string) {
	if value != "" {
		l.add(category, item, key, value)
	}
}

func extraHardware(ctx context.Context, c *collection) ([]HardwareItem, error) {
	var l hwList
	if err := c.extraDisks(ctx, &l); err != nil {
		return nil, err
	}
	c.extraSystem(&l)
	c.extraCPUs(&l)
	inv := c.inv
	if v, err := c.fs.ReadString("proc/sys/kernel/osrelease"); err == nil {
		l.addString("system", "kernel", "version", v)
	}
	// hardware-detect runs `uname -i`: RHEL-family ramdisks print the
	// machine there (Debian's uname prints "unknown").
	l.addString("system", "kernel", "arch", inv.CPU.Architecture)
	if b, err := c.fs.ReadFile("proc/cmdline"); err == nil {
		l.addString("system", "kernel", "cmdline", strings.TrimSpace(firstLine(string(b))))
	}
	return l, ctx.Err()
}

// firstLine is Python's readline() without its line end.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// extraDisks is diskinfo.detect.
func (c *collection) extraDisks(ctx context.Context, l *hwList) error {
	ents, err := c.fs.ReadDir("sys/block")
	if err != nil {
		l.add("disk", "logical", "count", "0")
		return nil
	}
	type disk struct {
		name string
		gb   uint64
	}
	var disks []disk
	for _, e := range ents {
		name := e.Name()
		if !(len(name) > 1 && name[1] == 'd' && strings.ContainsRune("shv", rune(name[0])) || strings.HasPrefix(name, "nvme")) {
			continue
		}
		s, err := c.fs.ReadString(path.Join("sys/block", name, "size"))
		if err != nil {
			continue
		}
		sectors, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			continue
		}
		// int(sectors * 512 / 10^9), and 10^9 / 512 = 1953125.
		if gb := sectors / 1953125; gb > 0 {
			disks = append(disks, disk{name, gb})
		}
	}
	l.add("disk", "logical", "count", strconv.Itoa(len(disks)))
	for _, d := range disks {
		if err := ctx.Err(); err != nil {
			return err
		}
		dir := path.Join("sys/block", d.name)
		l.add("disk", d.name, "size", strconv.FormatUint(d.gb, 10))
		for _, info := range []string{"device/vendor", "device/model", "device/rev", "queue/optimal_io_size",
			"queue/physical_block_size", "queue/rotational", "queue/nr_requests"} {
			// diskinfo's fallbacks: "rev" becomes "revision" and a missing
			// file is looked for below device/ (an NVMe namespace's
			// device/device is the PCI function).
			p := path.Join(dir, info)
			if !c.exists(p) {
				if info == "device/rev" {
					info = "device/revision"
				}
				p = path.Join(dir, "device", info)
			}
			b, err := c.fs.ReadFile(p)
			if err != nil {
				continue
			}
			_, key, _ := strings.Cut(info, "/")
			l.add("disk", d.name, key, strings.TrimSpace(firstLine(string(b))))
		}
		// The first bracketed name: "mq-deadline [none]".
		if b, err := c.fs.ReadFile(path.Join(dir, "queue/scheduler")); err == nil {
			if _, rest, ok := strings.Cut(firstLine(string(b)), "["); ok {
				if sched, _, ok := strings.Cut(rest, "]"); ok {
					l.add("disk", d.name, "scheduler", sched)
				}
			}
		}
		if !strings.HasPrefix(d.name, "nvme") {
			c.extraDiskCache(l, d.name)
		}
		c.extraDiskIDs(l, d.name)
	}
	return nil
}

func (c *collection) exists(rel string) bool {
	_, err := c.fs.Stat(rel)
	return err == nil
}

// extraDiskCache reads the SCSI disk's cache mode (diskinfo's
// get_disk_cache).
func (c *collection) extraDiskCache(l *hwList, name string) {
	link, err := c.fs.Readlink(path.Join("sys/block", name, "device"))
	if err != nil {
		return
	}
	b, err := c.fs.ReadFile(path.Join("sys/block", name, "device/scsi_disk", path.Base(link), "cache_type"))
	if err != nil {
		return
	}
	wce, rcd := "1", "0"
	switch mode := strings.TrimSpace(firstLine(string(b))); {
	case mode == "write through":
		wce = "0"
	case mode == "none":
		wce, rcd = "0", "1"
	case strings.Contains(mode, "daft"):
		rcd = "1"
	}
	l.add("disk", name, "Write Cache Enable", wce)
	l.add("disk", name, "Read Cache Disable", rcd)
}

// extraDiskIDs lists the /dev/disk/by-id links to the disk (diskinfo's
// get_disk_id), in name order.
func (c *collection) extraDiskIDs(l *hwList, name string) {
	ents, err := c.fs.ReadDir("dev/disk/by-id")
	if err != nil {
		return
	}
	for _, e := range ents {
		target, err := c.fs.Readlink(path.Join("dev/disk/by-id", e.Name()))
		if err != nil || path.Base(target) != name {
			continue
		}
		key := "id"
		switch {
		case strings.HasPrefix(e.Name(), "wwn"):
			key = "wwn-id"
		case strings.HasPrefix(e.Name(), "scsi"):
			key = "scsi-id"
		}
		l.add("disk", name, key, e.Name())
	}
}

// extraSystem is system.detect's lshw part.
func (c *collection) extraSystem(l *hwList) {
	inv := c.inv
	si, _ := c.smbiosTable()
	var sys, board smbiosStructure
	var hasSys, hasBoard bool
	if si != nil {
		sys, hasSys = si.first(1)
		board, hasBoard = si.first(2)
	}
	l.addString("system", "product", "serial", inv.SystemVendor.SerialNumber)
	l.addString("system", "product", "name", inv.SystemVendor.ProductName)
	l.addString("system", "product", "vendor", inv.SystemVendor.Manufacturer)
	if hasSys {
		l.addString("system", "product", "version", sys.str(0x06))
	}
	uuid := ""
	if hasSys && len(sys.Formatted) >= 0x19 {
		uuid = dmidecode.UUIDWord(sys.Formatted[0x08:0x18], dmiVersion(si.EntryPoint))
		// `dmidecode | awk '{print $2}'` keeps "Not" of "Not Present".
		if uuid == "Not" {
			uuid = ""
		}
		l.addString("system", "product", "uuid", uuid)
	}
	mobo := ""
	if hasBoard && len(board.Formatted) >= 0x08 {
		l.addString("system", "motherboard", "name", board.str(0x05))
		l.addString("system", "motherboard", "vendor", board.str(0x04))
		l.addString("system", "motherboard", "version", board.str(0x06))
		mobo = board.str(0x07)
		l.addString("system", "motherboard", "serial", mobo)
	}
	fw := inv.SystemVendor.Firmware
	l.addString("firmware", "bios", "version", fw.Version)
	l.addString("firmware", "bios", "date", fw.BuildDate)
	l.addString("firmware", "bios", "vendor", fw.Vendor)
	// lshw's "System Memory" size: the SMBIOS memory devices, else the
	// online memory blocks (physical_mb's sources).
	var total uint64
	if si != nil {
		total, _ = si.memoryDeviceBytes()
	}
	if total == 0 {
		if b, err := c.memoryBlockBytes(); err == nil {
			total = b
		}
	}
	if total > 0 {
		l.add("memory", "total", "size", strconv.FormatUint(total, 10))
	}
	nic := ""
	for _, ifc := range inv.Interfaces {
		c.extraNIC(l, ifc)
		if nic == "" {
			nic = strings.ReplaceAll(strings.ToLower(ifc.MACAddress), ":", "")
		}
	}
	// Boards known to report a fake serial get another identifier.
	for i, item := range *l {
		if item.Category != "system" || item.Item != "product" || item.Key != "serial" {
			continue
		}
		if item.Value == "0123456789" || item.Value == "0000000000" {
			if serial := cmp.Or(uuid, mobo, nic); serial != "" {
				*l = append(append((*l)[:i:i], (*l)[i+1:]...), HardwareItem{"system", "product", "serial", serial})
			}
		}
		break
	}
}

// extraNIC is system.py's network part for one NIC, from what lshw reads
// without ethtool and pci.ids: the bus address ("pci@0000:00:03.0", or
// "virtio@1" for virtio-net), the IPv4 address, the carrier, the driver
// and the MAC.
func (c *collection) extraNIC(l *hwList, ifc inventory.Interface) {
	name := ifc.Name
	if link, err := c.fs.Readlink(path.Join("sys/class/net", name, "device")); err == nil {
		dev := path.Base(link)
		switch {
		case udev.IsPCIName(dev):
			l.add("network", name, "businfo", "pci@"+dev)
		case strings.HasPrefix(dev, "virtio"):
			l.add("network", name, "businfo", "virtio@"+strings.TrimPrefix(dev, "virtio"))
		}
	}
	if ifc.IPv4Address != nil {
		l.addString("network", name, "ipv4", *ifc.IPv4Address)
	}
	link := "no"
	if ifc.HasCarrier {
		link = "yes"
	}
	l.add("network", name, "link", link)
	if ifc.Driver != nil {
		l.addString("network", name, "driver", *ifc.Driver)
	}
	l.addString("network", name, "serial", strings.ToLower(ifc.MACAddress))
}

// extraCPUs is detect_utils.get_cpus over the values lscpu prints.
func (c *collection) extraCPUs(l *hwList) {
	cpu := c.inv.CPU
	info, _ := c.fs.ReadFile("proc/cpuinfo")
	blocks := parseCPUInfo(string(info))
	first := map[string]string{}
	if len(blocks) > 0 {
		first = blocks[0]
	}
	sockets := cpu.SocketCount
	l.add("cpu", "physical", "number", sockets)
	if v, err := c.fs.ReadFile("sys/devices/system/cpu/smt/control"); err == nil {
		l.add("cpu", "physical", "smt", firstLine(string(v)))
	}
	cpus, _ := c.presentCPUs()
	threadsPerCore := 1
	if len(cpus) > 0 {
		if s, err := c.fs.ReadString(fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpus[0])); err == nil {
			if ids, err := parseCPUList(s); err == nil && len(ids) > 0 {
				threadsPerCore = len(ids)
			}
		}
	}
	coresPerSocket := 0
	if sockets > 0 {
		coresPerSocket = cpu.Count / sockets / threadsPerCore
	}
	minMHz, maxMHz := c.cpuFreqRange(cpus)
	for n := range sockets {
		tag := fmt.Sprintf("physical_%d", n)
		if v, err := c.fs.ReadFile("sys/devices/system/cpu/cpufreq/boost"); err == nil {
			boost := "disabled"
			if firstLine(string(v)) == "1" {
				boost = "enabled"
			}
			l.add("cpu", tag, "boost", boost)
		}
		l.addString("cpu", tag, "vendor", first["vendor_id"])
		l.addString("cpu", tag, "product", cpu.ModelName)
		if coresPerSocket > 0 {
			l.add("cpu", tag, "cores", coresPerSocket)
		}
		l.add("cpu", tag, "threads", threadsPerCore*max(coresPerSocket, 1))
		for _, k := range []struct{ key, cpuinfo string }{{"family", "cpu family"}, {"model", "model"}, {"stepping", "stepping"}} {
			if v, err := strconv.Atoi(first[k.cpuinfo]); err == nil {
				l.add("cpu", tag, k.key, v)
			}
		}
		l.addString("cpu", tag, "architecture", cpu.Architecture)
		if minMHz >= 0 {
			l.add("cpu", tag, "min_Mhz", minMHz)
			l.add("cpu", tag, "max_Mhz", maxMHz)
		}
		if len(cpu.Flags) > 0 {
			l.add("cpu", tag, "flags", strings.Join(cpu.Flags, " "))
		}
		l.add("cpu", tag, "threads_per_core", threadsPerCore)
	}
	l.add("cpu", "logical", "number", cpu.Count)
	for n := range cpu.Count {
		// get_cpus numbers cpufreq policies like CPUs.
		for _, rel := range []string{
			fmt.Sprintf("sys/devices/system/cpu/cpufreq/policy%d/scaling_governor", n),
			fmt.Sprintf("sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor", n),
		} {
			if v, err := c.fs.ReadFile(rel); err == nil {
				l.add("cpu", fmt.Sprintf("logical_%d", n), "governor", firstLine(string(v)))
				break
			}
		}
	}
	c.extraNUMA(l)
}

// cpuFreqRange is lscpu's "CPU min MHz" and "CPU max MHz": the extremes
// of the CPUs' cpufreq limits; -1 when no CPU has cpufreq.
func (c *collection) cpuFreqRange(cpus []int) (float64, float64) {
	lo, hi := int64(-1), int64(-1)
	for _, n := range cpus {
		base := fmt.Sprintf("sys/devices/system/cpu/cpu%d/cpufreq/", n)
		minS, err1 := c.fs.ReadString(base + "cpuinfo_min_freq")
		maxS, err2 := c.fs.ReadString(base + "cpuinfo_max_freq")
		minK, err3 := strconv.ParseInt(minS, 10, 64)
		maxK, err4 := strconv.ParseInt(maxS, 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			continue
		}
		if lo < 0 || minK < lo {
			lo = minK
		}
		hi = max(hi, maxK)
	}
	if lo < 0 {
		return -1, -1
	}
	return float64(lo) / 1000, float64(hi) / 1000
}

// extraNUMA is lscpu's "NUMA node(s)" and each node's CPU count.
func (c *collection) extraNUMA(l *hwList) {
	ents, err := c.fs.ReadDir("sys/devices/system/node")
	if err != nil {
		return
	}
	type node struct{ id, cpus int }
	var nodes []node
	for _, e := range ents {
		id, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node"))
		if err != nil || !strings.HasPrefix(e.Name(), "node") {
			continue
		}
		n := node{id: id}
		if s, err := c.fs.ReadString(path.Join("sys/devices/system/node", e.Name(), "cpulist")); err == nil {
			if ids, err := parseCPUList(s); err == nil {
				n.cpus = len(ids)
			}
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return
	}
	slices.SortFunc(nodes, func(a, b node) int { return cmp.Compare(a.id, b.id) })
	l.add("numa", "nodes", "count", len(nodes))
	for _, n := range nodes {
		l.add("numa", fmt.Sprintf("node_%d", n.id), "cpu_count", n.cpus)
	}
}
