package collector

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/collector/internal/udev"
	"github.com/ironic-go/ironic-agent/inventory"
)

// The disk collector reproduces what IPA reports in disks[]: IPA runs
// `lsblk -bia --json -o KNAME,MODEL,SIZE,ROTA,TYPE,...` (util-linux 2.38 on
// Debian bookworm), fills gaps from udev (systemd 252) and reads vendor,
// hctl and the by-path link itself. We read the same kernel sources
// directly and, where IPA relies on udev, compute udev's values from sysfs
// (VPD pages, wwid, serial attributes, path_id), so the record is complete
// on a ramdisk without udevd and identical when udev data is present.
//
// Files read below the root, per device <d> (sys/block/<d> or
// sys/class/block/<d>): dev, size, hidden, queue/{rotational,
// logical_block_size,physical_block_size}, holders/, slaves/, dm/uuid,
// md/level, serial, wwid, nsid, device (link and its target: type,
// vendor, model, serial, wwid, vpd_pg80, vpd_pg83, vpd_pg89,
// scsi_device/), the device's subsystem links; and sys/class/{scsi_host,
// spi_host,fc_host,sas_host,iscsi_host,ata_port,sas_device,sas_port,
// fc_transport,iscsi_session,iscsi_connection,nvme}, sys/bus/scsi/devices,
// run/udev/data/b<major>:<minor> and dev/disk/by-path/.

// blockDev is one entry of /sys/block (or a named device) with what the
// listing rules need.
type blockDev struct {
	name    string // kernel name, e.g. "sda"
	base    string // root-relative sysfs dir, e.g. "sys/block/sda"
	devPath string // canonical sysfs path below sys/devices ("" if unknown)
	major   uint64
	minor   uint64
	typ     string // lsblk's TYPE column
	size    int64  // bytes
	sizeOK  bool
	nslaves int
	isPart  bool
}

type diskCollector struct {
	r       *sysReader
	opts    Options
	useUdev bool
	// byPath maps "/dev/<name>" to the names of the /dev/disk/by-path links
	// resolving to it; nil when the directory does not exist.
	byPath map[string][]string
}

func newDiskCollector(opts Options) *diskCollector {
	c := &diskCollector{r: newSysReader(opts.root(), opts.logger()), opts: opts, useUdev: !opts.IgnoreUdev}
	// capture-fixture copies what the disk collector reads too.
	c.r.trace = opts.trace
	if c.useUdev {
		c.byPath = c.readByPath()
	}
	return c
}

// Disks lists the block devices IPA lists in the inventory, in lsblk's
// order (by device number), with IPA's fields.
//
// Inclusion follows IPA's list_all_block_devices: whole disks of lsblk
// TYPE "disk", RAID devices (md arrays, whose TYPE is their level such as
// "raid1", SCSI RAID controllers, dmraid) and device-mapper multipath maps;
// not loop, rom, partitions, LVM or dm-crypt; no floppies (fd*), RAM disks
// (ram*, zram*), empty devices (size 0), and no path that belongs to a
// multipath map (the map is listed instead). Removable and read-only
// devices are kept, as in IPA.
func Disks(ctx context.Context, opts Options) ([]inventory.Disk, error) {
	c := newDiskCollector(opts)
	names := c.r.entries("sys/block")
	if names == nil && !c.r.isDir("sys/block") {
		c.r.warnOnce("sys/block", "missing: no block devices can be listed")
		return []inventory.Disk{}, nil
	}
	var devs []*blockDev
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, ok := c.probe(name)
		if !ok || !c.listed(d) {
			continue
		}
		devs = append(devs, d)
	}
	sortByDevno(devs)
	out := make([]inventory.Disk, 0, len(devs))
	for _, d := range devs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out = append(out, c.record(d))
	}
	return out, nil
}

// BlockDevices returns the inventory record of each named device
// ("/dev/loop3", "loop3" or a link such as "/dev/disk/by-path/..."), in the
// order given, without IPA's type and size filters: the agent uses it when
// it is confined to explicitly allowed devices (test loop devices). A name
// that is not a block device is an error.
func BlockDevices(ctx context.Context, opts Options, names []string) ([]inventory.Disk, error) {
	c := newDiskCollector(opts)
	out := make([]inventory.Disk, 0, len(names))
	seen := map[string]bool{}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := strings.TrimPrefix(n, "/dev/")
		if strings.HasPrefix(n, "/dev/") && strings.Contains(name, "/") && !strings.Contains(name, "\x00") {
			// A persistent name (/dev/disk/by-id/..., by-path/...): the
			// kernel name is what the link resolves to.
			p, err := c.resolveDevLink("dev/" + name)
			if err != nil || path.Dir(p) != "dev" {
				return nil, fmt.Errorf("block device %s: not a link to a device node in /dev below %s", n, c.r.root)
			}
			name = path.Base(p)
		}
		if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
			return nil, fmt.Errorf("block device %q: want /dev/<kernel name> or a /dev/disk/... link", n)
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		d, ok := c.probe(name)
		if !ok {
			return nil, fmt.Errorf("block device %s: not found below %s (no sys/class/block/%s)", n, c.r.root, name)
		}
		out = append(out, c.record(d))
	}
	return out, nil
}

// resolveDevLink follows a udev link below /dev to the device node it
// names; the node itself need not exist (fixture trees have no nodes).
func (c *diskCollector) resolveDevLink(rel string) (string, error) {
	dir, err := c.r.resolve(path.Dir(rel))
	if err != nil {
		return "", err
	}
	t, ok := c.r.readlink(dir + "/" + path.Base(rel))
	if !ok {
		return "", fmt.Errorf("/%s is not a symbolic link", rel)
	}
	if strings.HasPrefix(t, "/") {
		return path.Clean(strings.TrimPrefix(t, "/")), nil
	}
	return path.Join(dir, t), nil
}

// probe reads what the listing needs. ok is false for names that are not
// usable block devices (missing or unreadable dev number, hidden paths).
func (c *diskCollector) probe(name string) (*blockDev, bool) {
	base := "sys/block/" + name
	if !c.r.exists(base) {
		base = "sys/class/block/" + name
		if !c.r.exists(base) {
			return nil, false
		}
	}
	d := &blockDev{name: name, base: base}
	devno, ok := c.r.attr(base + "/dev")
	if !ok {
		c.r.warnOnce(base+"/dev", "missing: device skipped, lsblk cannot list it either")
		return nil, false
	}
	major, minor, ok := parseDevno(devno)
	if !ok {
		c.r.warnOnce(base+"/dev", fmt.Sprintf("not a major:minor pair: %q", truncate(devno, 40)))
		return nil, false
	}
	d.major, d.minor = major, minor
	// Hidden disks (the per-path nodes of native NVMe multipath) are not
	// listed by lsblk.
	if h, ok := c.r.attr(base + "/hidden"); ok && strings.TrimSpace(h) == "1" {
		return nil, false
	}
	if p, err := c.r.resolve(base); err == nil {
		d.devPath = p
	}
	if sectors, ok := c.r.attrInt(base + "/size"); ok {
		d.size, d.sizeOK = sectors*512, true
	} else {
		c.r.warnOnce(base+"/size", "missing")
	}
	d.nslaves = len(c.r.entries(base + "/slaves"))
	d.isPart = c.r.exists(base + "/partition")
	d.typ = c.lsblkType(d)
	return d, true
}

func parseDevno(s string) (uint64, uint64, bool) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return 0, 0, false
	}
	major, err1 := strconv.ParseUint(a, 10, 32)
	minor, err2 := strconv.ParseUint(b, 10, 32)
	return major, minor, err1 == nil && err2 == nil
}

// lsblkType is lsblk's TYPE column (util-linux misc-utils/lsblk.c,
// get_type): "part" for partitions, the dm/uuid prefix for device-mapper
// ("mpath", "lvm", "crypt", ...; "dm" without one), "loop", the md level
// for md devices ("raid1"; "md" if unknown), else the SCSI peripheral type
// name ("disk", "rom", "raid", ...), "disk" when there is none.
func (c *diskCollector) lsblkType(d *blockDev) string {
	if d.isPart {
		return "part"
	}
	switch {
	case strings.HasPrefix(d.name, "dm-"):
		if u, ok := c.r.attr(d.base + "/dm/uuid"); ok && u != "" {
			prefix, _, _ := strings.Cut(u, "-")
			if len(prefix) >= 4 && strings.EqualFold(prefix[:4], "part") {
				prefix = prefix[:4]
			}
			return strings.ToLower(prefix)
		}
		return "dm"
	case strings.HasPrefix(d.name, "loop"):
		return "loop"
	case strings.HasPrefix(d.name, "md"):
		if l, ok := c.r.attr(d.base + "/md/level"); ok && l != "" {
			return strings.ToLower(l)
		}
		return "md"
	}
	if s, ok := c.r.attr(d.base + "/device/type"); ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32); err == nil {
			if t := scsiTypeName(n); t != "" {
				return t
			}
		}
	}
	return "disk"
}

// scsiTypeName is util-linux's blkdev_scsi_type_to_name.
func scsiTypeName(t int64) string {
	switch t {
	case 0x00:
		return "disk"
	case 0x01:
		return "tape"
	case 0x02:
		return "printer"
	case 0x03:
		return "processor"
	case 0x04:
		return "worm"
	case 0x05:
		return "rom"
	case 0x06:
		return "scanner"
	case 0x07:
		return "mo-disk"
	case 0x08:
		return "changer"
	case 0x09:
		return "comm"
	case 0x0c:
		return "raid"
	case 0x0d:
		return "enclosure"
	case 0x0e:
		return "rbc"
	case 0x11:
		return "osd"
	case 0x7f:
		return "no-lun"
	}
	return ""
}

// listed applies IPA's rules (list_all_block_devices with
// block_type="disk") in IPA's order.
func (c *diskCollector) listed(d *blockDev) bool {
	if strings.HasPrefix(d.name, "fd") {
		return false
	}
	if c.isMultipathMember(d) {
		return false
	}
	switch {
	case d.typ == "disk", strings.Contains(d.typ, "raid"), d.typ == "mpath":
	default:
		return false
	}
	if strings.HasPrefix(d.name, "ram") || strings.HasPrefix(d.name, "zram") {
		return false
	}
	return d.size != 0
}

// isMultipathMember tells whether a device-mapper multipath map holds d:
// IPA asks `multipath -c`; sysfs says the same through holders/ and the
// holder's dm/uuid ("mpath-<wwid>").
func (c *diskCollector) isMultipathMember(d *blockDev) bool {
	_, ok := c.multipathHolder(d)
	return ok
}

// multipathHolder returns the name (dm/name) of the multipath map holding
// d, if one does.
func (c *diskCollector) multipathHolder(d *blockDev) (string, bool) {
	for _, h := range c.r.entries(d.base + "/holders") {
		if !strings.HasPrefix(h, "dm-") {
			continue
		}
		dir := d.base + "/holders/" + h + "/dm"
		u, ok := c.r.attr(dir + "/uuid")
		if !ok {
			dir = "sys/block/" + h + "/dm"
			u, ok = c.r.attr(dir + "/uuid")
		}
		if ok && strings.HasPrefix(strings.ToLower(u), "mpath-") {
			name, _ := c.r.attr(dir + "/name")
			return name, true
		}
	}
	return "", false
}

// sortByDevno orders devices as lsblk does by default: by dev_t, the
// number glibc's makedev (and Linux's unix.Mkdev) builds, so minors above
// 255 sort after every small minor of the same major.
func sortByDevno(devs []*blockDev) {
	key := func(d *blockDev) uint64 {
		return unix.Mkdev(uint32(d.major), uint32(d.minor))
	}
	sort.SliceStable(devs, func(i, j int) bool { return key(devs[i]) < key(devs[j]) })
}

// record builds IPA's BlockDevice for d.
func (c *diskCollector) record(d *blockDev) inventory.Disk {
	props := c.props(d)
	disk := inventory.Disk{Name: "/dev/" + d.name, Size: d.size}

	// model and serial: lsblk's MODEL/SERIAL (udev first, then sysfs; only
	// for devices without slaves), then IPA's own udev fallbacks.
	if d.nslaves == 0 && !d.isPart {
		if v := props["ID_MODEL_ENC"]; v != "" {
			disk.Model = inventory.StrOrNil(udev.NormalizeWhitespace(udev.Unhexmangle(v)))
		} else if v := props["ID_MODEL"]; v != "" {
			disk.Model = inventory.StrOrNil(udev.NormalizeWhitespace(v))
		} else if v, ok := c.r.attr(d.base + "/device/model"); ok {
			disk.Model = inventory.StrOrNil(v)
		}
		serial := firstNonEmpty(props, "SCSI_IDENT_SERIAL", "ID_SCSI_SERIAL", "ID_SERIAL_SHORT", "ID_SERIAL")
		if serial != "" {
			disk.Serial = inventory.StrOrNil(udev.NormalizeWhitespace(serial))
		} else if v, ok := c.r.attr(d.base + "/device/serial"); ok {
			disk.Serial = inventory.StrOrNil(v)
		}
	}
	if disk.Serial == nil {
		if v := firstNonEmpty(props, "ID_SERIAL_SHORT", "DM_SERIAL_SHORT"); v != "" {
			disk.Serial = &v
		} else if v := firstNonEmpty(props, "ID_SERIAL", "DM_SERIAL"); v != "" {
			disk.Serial = &v
		}
	}
	if v := firstNonEmpty(props, "ID_WWN_WITH_EXTENSION", "ID_WWN"); v != "" {
		disk.WWN = &v
	} else if v := firstNonEmpty(props, "DM_WWN"); v != "" {
		disk.WWN = &v
	}
	disk.WWNWithExtension = inventory.StrOrNil(firstNonEmpty(props, "ID_WWN_WITH_EXTENSION", "DM_WWN_WITH_EXTENSION"))
	disk.WWNVendorExtension = inventory.StrOrNil(firstNonEmpty(props, "ID_WWN_VENDOR_EXTENSION", "DM_WWN_VENDOR_EXTENSION"))

	if b, err := c.r.read(d.base + "/device/vendor"); err == nil {
		v := strings.TrimSpace(string(b))
		disk.Vendor = &v
	}
	if r, ok := c.r.attrInt(c.queueFile(d, "rotational")); ok {
		disk.Rotational = r != 0
	} else {
		c.r.warnOnce(c.queueFile(d, "rotational"), "missing: reported as not rotational")
	}
	if hs := c.r.entries(d.base + "/device/scsi_device"); len(hs) > 0 {
		disk.HCTL = &hs[0]
	}
	disk.ByPath = c.byPathOf(d, props)
	disk.LogicalSectors = c.sectorSize(c.queueFile(d, "logical_block_size"))
	disk.PhysicalSectors = c.sectorSize(c.queueFile(d, "physical_block_size"))
	disk.Tran = inventory.StrOrNil(c.transport(d))
	return disk
}

// queueFile names a request-queue attribute of d. A partition has no
// queue/ of its own; util-linux then reads the whole disk's, and so do we.
func (c *diskCollector) queueFile(d *blockDev, attr string) string {
	own := d.base + "/queue/" + attr
	if d.isPart && !c.r.exists(own) && d.devPath != "" {
		return path.Dir(d.devPath) + "/queue/" + attr
	}
	return own
}

func (c *diskCollector) sectorSize(rel string) *int {
	v, ok := c.r.attrInt(rel)
	if !ok {
		c.r.warnOnce(rel, "missing")
		return nil
	}
	n := int(v)
	return &n
}

func firstNonEmpty(props map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := props[k]; v != "" {
			return v
		}
	}
	return ""
}

// props returns the device's udev properties: the udev database record when
// there is one (and udev is not ignored), else the properties udev's rules
// would have computed, derived from sysfs.
func (c *diskCollector) props(d *blockDev) map[string]string {
	if c.useUdev {
		rel := fmt.Sprintf("run/udev/data/b%d:%d", d.major, d.minor)
		// A missing record (udev not running, or a device it has not
		// processed) is not worth a warning; read warns about other
		// failures itself.
		if b, err := c.r.read(rel); err == nil {
			rec, perr := udev.ParseRecord(b)
			if perr == nil {
				return rec.Props
			}
			c.r.warnOnce(rel, "garbled udev record, values derived from sysfs instead: "+perr.Error())
		}
	}
	return c.deriveProps(d)
}

// byPathOf is the /dev/disk/by-path link of the device: the link that
// resolves to it when that directory exists (as IPA scans it), else the
// link udev would create, named by ID_PATH. When several links resolve to
// the device (bookworm's udev adds "...-ata-3" next to "...-ata-3.0", and
// "virtio-pci-..." next to "pci-..."), the one named by ID_PATH wins: IPA
// keeps whichever its directory listing returns last, which is not
// predictable.
func (c *diskCollector) byPathOf(d *blockDev, props map[string]string) *string {
	idPath := props["ID_PATH"]
	if c.byPath != nil {
		links := c.byPath["/dev/"+d.name]
		if len(links) == 0 {
			return nil
		}
		pick := links[0]
		for _, l := range links {
			if l == idPath {
				pick = l
			}
		}
		s := "/dev/disk/by-path/" + pick
		return &s
	}
	if idPath == "" {
		return nil
	}
	s := "/dev/disk/by-path/" + idPath
	return &s
}

// readByPath maps each /dev/<name> to the by-path links naming it, or
// returns nil when dev/disk/by-path does not exist below the root.
func (c *diskCollector) readByPath() map[string][]string {
	const dir = "dev/disk/by-path"
	if !c.r.isDir(dir) {
		return nil
	}
	m := map[string][]string{}
	for _, e := range c.r.entries(dir) {
		t, ok := c.r.readlink(dir + "/" + e)
		if !ok {
			continue
		}
		if !strings.HasPrefix(t, "/") {
			t = path.Join("/"+dir, t)
		}
		m[path.Clean(t)] = append(m[path.Clean(t)], e)
	}
	return m
}

// transport is lsblk's TRAN column (misc-utils/lsblk.c, get_transport):
// decided by the SCSI host's transport class, else "nvme" by name.
func (c *diskCollector) transport(d *blockDev) string {
	// lsblk takes the hctl from the last component of the "device" link;
	// the resolved path ends in the same name.
	scsiDev, err := c.r.resolve(d.base + "/device")
	parts, ok := udev.HCTL(path.Base(scsiDev))
	if err != nil || !ok {
		if strings.HasPrefix(d.name, "nvme") {
			return "nvme"
		}
		return ""
	}
	hctl := path.Base(scsiDev)
	host := "host" + parts[0]
	hostDir := udev.SCSIHostDir(scsiDev)
	sys := c.sys()
	switch {
	case udev.ClassExists(sys, "spi_host", host, hostDir):
		return "spi"
	case udev.ClassExists(sys, "fc_host", host, hostDir):
		name, ok := udev.ClassAttr(sys, "fc_host", host, hostDir, "symbolic_name")
		if !ok {
			return ""
		}
		if strings.Contains(name, " over ") {
			return "fcoe"
		}
		return "fc"
	case udev.ClassExists(sys, "sas_host", host, hostDir) ||
		c.r.exists("sys/bus/scsi/devices/"+hctl+"/sas_device") || c.r.exists(scsiDev+"/sas_device"):
		return "sas"
	case c.r.exists("sys/bus/scsi/devices/"+hctl+"/ieee1394_id") || c.r.exists(scsiDev+"/ieee1394_id"):
		return "sbp"
	case udev.ClassExists(sys, "iscsi_host", host, hostDir):
		return "iscsi"
	case strings.Contains(scsiDev, "usb"):
		return "usb"
	case udev.ClassExists(sys, "scsi_host", host, hostDir):
		proc, ok := udev.ClassAttr(sys, "scsi_host", host, hostDir, "proc_name")
		if !ok {
			return ""
		}
		if strings.HasPrefix(proc, "ahci") || strings.HasPrefix(proc, "sata") {
			return "sata"
		}
		if strings.Contains(proc, "ata") {
			return "ata"
		}
		return ""
	}
	if strings.HasPrefix(d.name, "nvme") {
		return "nvme"
	}
	return ""
}
