package collector

import (
	"context"
	"fmt"
	"maps"
	"path"
	"strings"
)

// BlockView is one block device as an operator reads it in the agent's
// log bundle: every device the kernel has (partitions, loop, md and
// device-mapper devices too), not only the inventory's disks.
type BlockView struct {
	Name   string // kernel name ("sda1")
	MajMin string // "8:1"
	Type   string // lsblk's TYPE: disk, part, raid1, mpath, loop, rom, ...
	Size   int64  // bytes; -1 when unknown
	RO, RM bool   // read-only, removable
	// Parent is a partition's disk; Start its first 512-byte sector.
	Parent string
	Start  int64
	// Holders are the devices built on this one (md arrays, dm maps).
	Holders []string
	// Udev holds the properties udev's rules would have stored (the
	// udev database's record when udev runs, else derived from sysfs as
	// the inventory's disks are).
	Udev map[string]string
}

// BlockViews lists every block device below opts' root in device-number
// order, partitions included (what lsblk --all shows).
func BlockViews(ctx context.Context, opts Options) ([]BlockView, error) {
	c := newDiskCollector(opts)
	names := c.r.entries("sys/class/block")
	if names == nil && !c.r.isDir("sys/class/block") {
		return nil, fmt.Errorf("%s/sys/class/block: missing: no block devices can be listed", opts.root())
	}
	var devs []*blockDev
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if d, ok := c.probe(name); ok {
			devs = append(devs, d)
		}
	}
	sortByDevno(devs)
	out := make([]BlockView, 0, len(devs))
	for _, d := range devs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v := BlockView{Name: d.name, MajMin: fmt.Sprintf("%d:%d", d.major, d.minor), Type: d.typ, Size: -1,
			Holders: c.r.entries(d.base + "/holders"), Udev: c.ueventProps(d)}
		maps.Copy(v.Udev, c.props(d))
		if d.sizeOK {
			v.Size = d.size
		}
		if s, ok := c.r.attr(d.base + "/ro"); ok {
			v.RO = strings.TrimSpace(s) == "1"
		}
		if d.isPart {
			if d.devPath != "" {
				v.Parent = path.Base(path.Dir(d.devPath))
			}
			if n, ok := c.r.attrInt(d.base + "/start"); ok {
				v.Start = n
			}
		} else if s, ok := c.r.attr(d.base + "/removable"); ok {
			v.RM = strings.TrimSpace(s) == "1"
		}
		out = append(out, v)
	}
	return out, nil
}

// ueventProps are the properties udev's database has from the kernel's
// uevent before any rule runs (what `udevadm info` lists first): DEVPATH,
// SUBSYSTEM, and the uevent file's MAJOR, MINOR, DEVNAME (as a /dev path),
// DEVTYPE, PARTN, PARTNAME, DISKSEQ.
func (c *diskCollector) ueventProps(d *blockDev) map[string]string {
	p := map[string]string{"SUBSYSTEM": "block"}
	if d.devPath != "" {
		p["DEVPATH"] = strings.TrimPrefix(d.devPath, "sys")
	}
	if b, err := c.r.read(d.base + "/uevent"); err == nil {
		for line := range strings.Lines(string(b)) {
			k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
			if !ok || k == "" {
				continue
			}
			if k == "DEVNAME" {
				v = "/dev/" + v
			}
			p[k] = v
		}
	}
	return p
}
