package udev

import (
	"path"
	"strconv"
	"strings"
)

// This file computes udev's ID_PATH (the name of the /dev/disk/by-path
// link) from a block device's sysfs path, the way systemd 252's path_id
// builtin does (Debian bookworm; src/udev/udev-builtin-path_id.c). It walks
// from the block device up to /sys/devices and prepends one element per
// recognised parent: "pci-0000:00:04.0", "scsi-0:0:3:0", "ata-3.0",
// "nvme-1", "sas-phy0-lun-0", "usb-0:1.2:1.0", ...
//
// Supported: PCI, platform, ACPI, Xen and virtio parents; SCSI (parallel,
// virtio-scsi and other plain HBAs), ATA (including port multipliers), SAS
// (direct and expander-attached, wide ports), Fibre Channel, iSCSI; USB;
// NVMe (with and without native NVMe multipath). Not handled (no ID_PATH,
// so by_path is null): Hyper-V vmbus, cciss, s390 buses, bcma, serio.

// PathIDResult is ID_PATH and, for ATA disks, ID_PATH_ATA_COMPAT (the
// pre-252 "ata-<port>" form udev still links).
type PathIDResult struct {
	Path   string
	Compat string
}

// HCTL splits a SCSI device name "host:channel:target:lun" into its four
// decimal numbers; ok is false for any other name.
func HCTL(name string) (hctl [4]string, ok bool) {
	n := 0
	for part := range strings.SplitSeq(name, ":") {
		if n == 4 || !isDigits(part) {
			return [4]string{}, false
		}
		hctl[n] = part
		n++
	}
	if n != 4 {
		return [4]string{}, false
	}
	return hctl, true
}

// SCSIHostDir is the nearest ancestor of the sysfs path p named
// "host<N>" (the SCSI host), or "".
func SCSIHostDir(p string) string { return ancestorMatching(p, isSCSIHost) }

// IsPCIName tells whether a sysfs device name is a PCI address
// ("0000:00:1f.2").
func IsPCIName(name string) bool {
	dom, rest, _ := strings.Cut(name, ":")
	bus, devfn, _ := strings.Cut(rest, ":")
	return len(dom) >= 4 && isLowerHex(dom) && len(bus) == 2 && isLowerHex(bus) &&
		len(devfn) == 4 && isLowerHex(devfn[:2]) && devfn[2] == '.' && devfn[3] >= '0' && devfn[3] <= '7'
}

// The sysfs names path_id and the disk collector tell apart, matched by
// hand: regular expressions cost every start of the agent their
// compilation.

// isHCTL matches a SCSI device, "<host>:<channel>:<target>:<lun>".
func isHCTL(name string) bool {
	_, ok := HCTL(name)
	return ok
}

// isSCSIHost matches "host<N>".
func isSCSIHost(name string) bool { return isNumbered(name, "host") }

// isSCSITarget matches "target<host>:<channel>:<target>".
func isSCSITarget(name string) bool {
	rest, ok := strings.CutPrefix(name, "target")
	if !ok {
		return false
	}
	h, rest, _ := strings.Cut(rest, ":")
	c, t, _ := strings.Cut(rest, ":")
	return isDigits(h) && isDigits(c) && isDigits(t)
}

// isUSBDevice matches a USB root hub ("usb1"), device ("1-1.2") or
// interface ("1-1.2:1.0").
func isUSBDevice(name string) bool {
	if isNumbered(name, "usb") {
		return true
	}
	bus, port, ok := strings.Cut(name, "-")
	if !ok || !isDigits(bus) {
		return false
	}
	port, intf, hasIntf := strings.Cut(port, ":")
	if port == "" || strings.Trim(port, "0123456789.") != "" {
		return false
	}
	if !hasIntf {
		return true
	}
	config, alt, _ := strings.Cut(intf, ".")
	return isDigits(config) && isDigits(alt)
}

// isNumbered matches prefix followed by a decimal number.
func isNumbered(name, prefix string) bool {
	n, ok := strings.CutPrefix(name, prefix)
	return ok && isDigits(n)
}

// isDigits tells whether s is one or more ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isLowerHex tells whether s is lower-case hex digits only.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// subsystem names the bus or class a sysfs device directory belongs to:
// the target of its "subsystem" link, or, when a recorded tree has no such
// link, a guess from the directory's name.
func subsystem(r Sys, dev string) string {
	if t, ok := r.Readlink(dev + "/subsystem"); ok {
		return path.Base(t)
	}
	name := path.Base(dev)
	switch {
	case IsPCIName(name):
		return "pci"
	case isHCTL(name), isSCSIHost(name), isSCSITarget(name):
		return "scsi"
	case isNumbered(name, "virtio"):
		return "virtio"
	case isNumbered(name, "nvme"):
		return "nvme"
	case isNumbered(name, "nvme-subsys"):
		return "nvme-subsystem"
	case isUSBDevice(name):
		return "usb"
	case path.Base(path.Dir(dev)) == "platform":
		return "platform"
	}
	return ""
}

// devParent is the next directory up, or "" above sys/devices.
func devParent(dev string) string {
	p := path.Dir(dev)
	if p == "sys/devices" || !strings.HasPrefix(p, "sys/devices/") {
		return ""
	}
	return p
}

// skipSubsystem returns the topmost of the consecutive ancestors of dev
// (dev included) that belong to subsys.
func skipSubsystem(r Sys, dev, subsys string) string {
	for p := dev; p != "" && subsystem(r, p) == subsys; p = devParent(p) {
		dev = p
	}
	return dev
}

// ClassAttr reads attribute attr of the class device name in class, looking
// first in /sys/class and then below the owning device directory (where
// the class device really lives), so trees recorded without /sys/class work.
func ClassAttr(r Sys, class, name, owner, attr string) (string, bool) {
	if v, ok := r.Attr("sys/class/" + class + "/" + name + "/" + attr); ok {
		return strings.TrimSpace(v), true
	}
	if v, ok := r.Attr(owner + "/" + class + "/" + name + "/" + attr); ok {
		return strings.TrimSpace(v), true
	}
	return "", false
}

func ClassExists(r Sys, class, name, owner string) bool {
	return r.IsDir("sys/class/"+class+"/"+name) || r.IsDir(owner+"/"+class+"/"+name)
}

// PathID computes ID_PATH for the block device whose canonical sysfs path
// (root-relative, below sys/devices) is dev. ok is false when udev would
// set no ID_PATH (virtual devices, unknown transports).
func PathID(r Sys, dev string) (PathIDResult, bool) {
	if !strings.HasPrefix(dev, "sys/devices/") {
		return PathIDResult{}, false
	}
	// 60-persistent-storage.rules imports path_id only for non-virtual
	// disks and for disks below an nvme-subsystem (native NVMe multipath).
	virtual := strings.HasPrefix(dev, "sys/devices/virtual/")
	if virtual && !strings.Contains(dev, "/nvme-subsystem/") {
		return PathIDResult{}, false
	}
	var elems, compat []string
	hasCompat := false
	prepend := func(s string) {
		elems = append([]string{s}, elems...)
		if hasCompat {
			compat = append([]string{s}, compat...)
		}
	}
	supportedTransport, supportedParent := false, false
	block := dev
	for p := dev; p != ""; {
		sub := subsystem(r, p)
		name := path.Base(p)
		switch sub {
		case "scsi":
			supportedTransport = true
			if !isHCTL(name) {
				break // hosts and targets: nothing to add here
			}
			var ok bool
			p, ok = pathIDSCSI(r, p, &elems, &compat, &hasCompat, &supportedParent)
			if !ok {
				return PathIDResult{}, false
			}
		case "usb":
			if !strings.Contains(name, "-") {
				break // a root hub ("usb1"): nothing to add
			}
			port := name[strings.IndexByte(name, '-')+1:]
			p = skipSubsystem(r, p, "usb")
			prepend("usb-0:" + port)
			supportedTransport = true
		case "pci", "platform", "acpi", "xen":
			prepend(sub + "-" + name)
			p = skipSubsystem(r, p, sub)
			supportedParent = true
			// A platform device is its own transport (SoC storage).
			supportedTransport = supportedTransport || sub == "platform"
		case "virtio":
			p = skipSubsystem(r, p, "virtio")
			supportedTransport = true
		case "nvme", "nvme-subsystem":
			nsid, ok := r.Attr(block + "/nsid")
			if !ok {
				break
			}
			prepend("nvme-" + strings.TrimSpace(nsid))
			if sub == "nvme-subsystem" {
				// The controller really lives on the PCI bus: continue
				// from /sys/class/nvme/nvmeN, named by the disk's
				// "nvme<N>" prefix.
				real, err := r.Resolve("sys/class/nvme/" + nvmeCtrlName(path.Base(block)))
				if err != nil || strings.HasPrefix(real, "sys/devices/virtual/") {
					return PathIDResult{}, false
				}
				p = real
			}
			p = skipSubsystem(r, p, "nvme")
			supportedParent, supportedTransport = true, true
		}
		if p == "" {
			break
		}
		p = devParent(p)
	}
	if len(elems) == 0 || !supportedParent || !supportedTransport {
		return PathIDResult{}, false
	}
	res := PathIDResult{Path: strings.Join(elems, "-")}
	if hasCompat {
		res.Compat = strings.Join(compat, "-")
	}
	return res, true
}

// pathIDSCSI handles a SCSI device (h:c:t:l) on the walk: it prepends the
// transport-specific element and returns where the walk continues.
func pathIDSCSI(r Sys, p string, elems, compat *[]string, hasCompat, supportedParent *bool) (string, bool) {
	prepend := func(s string) {
		*elems = append([]string{s}, *elems...)
		if *hasCompat {
			*compat = append([]string{s}, *compat...)
		}
	}
	// Firewire disks carry their GUID on the SCSI device.
	if id, ok := r.Attr(p + "/ieee1394_id"); ok {
		prepend("ieee1394-0x" + strings.TrimSpace(id))
		*supportedParent = true
		return skipSubsystem(r, p, "scsi"), true
	}
	m, _ := HCTL(path.Base(p))
	host, _ := strconv.Atoi(m[0])
	bus, _ := strconv.Atoi(m[1])
	target, _ := strconv.Atoi(m[2])
	lun, _ := strconv.ParseUint(m[3], 10, 64)
	lunStr := "lun-" + strconv.FormatUint(lun, 10)
	if lun >= 256 {
		lunStr = "lun-0x" + hex4(lun&0xffff) + hex4((lun>>16)&0xffff) + "00000000"
	}
	switch {
	case strings.Contains("/"+p, "/rport-"):
		*supportedParent = true
		tgt := ancestorMatching(p, isSCSITarget)
		if tgt == "" {
			return "", false
		}
		port, ok := ClassAttr(r, "fc_transport", path.Base(tgt), tgt, "port_name")
		if !ok {
			return "", false
		}
		prepend("fc-" + port + "-" + lunStr)
		return p, true
	case strings.Contains("/"+p, "/end_device-"):
		*supportedParent = true
		return pathIDSAS(r, p, lunStr, prepend)
	case strings.Contains("/"+p, "/session"):
		*supportedParent = true
		return pathIDISCSI(r, p, lunStr, prepend)
	case strings.Contains("/"+p, "/ata"):
		hostDir := ancestorMatching(p, isSCSIHost)
		if hostDir == "" {
			return "", false
		}
		ataDir := path.Dir(hostDir)
		portNo, ok := ClassAttr(r, "ata_port", path.Base(ataDir), ataDir, "port_no")
		if !ok {
			return "", false
		}
		if bus != 0 {
			// Behind a port multiplier the bus number is the PMP port.
			prepend("ata-" + portNo + "." + strconv.Itoa(bus) + ".0")
		} else {
			prepend("ata-" + portNo + "." + strconv.Itoa(target))
		}
		if !*hasCompat {
			*hasCompat = true
			*compat = []string{"ata-" + portNo}
		}
		return p, true
	case strings.Contains("/"+p, "/vmbus_") || strings.Contains("/"+p, "/VMBUS"):
		return "", false
	}
	// Plain HBA: the host number is rebased to the lowest "host<N>" under
	// the same parent device, so a second controller's first disk is
	// scsi-0:... too.
	hostDir := ancestorMatching(p, isSCSIHost)
	if hostDir == "" {
		return "", false
	}
	base := -1
	for _, e := range r.Entries(path.Dir(hostDir)) {
		if !isSCSIHost(e) {
			continue
		}
		if n, err := strconv.Atoi(e[4:]); err == nil && (base < 0 || n < base) {
			base = n
		}
	}
	if base < 0 {
		return hostDir, true
	}
	prepend("scsi-" + strconv.Itoa(host-base) + ":" + strconv.Itoa(bus) + ":" + strconv.Itoa(target) + ":" + strconv.FormatUint(lun, 10))
	return hostDir, true
}

func hex4(v uint64) string {
	s := strconv.FormatUint(v, 16)
	return strings.Repeat("0", 4-len(s)) + s
}

// ancestorMatching returns the nearest ancestor of p whose name matches.
func ancestorMatching(p string, match func(string) bool) string {
	for q := path.Dir(p); q != "." && q != "/" && q != ""; q = path.Dir(q) {
		if match(path.Base(q)) {
			return q
		}
		if q == "sys/devices" {
			break
		}
	}
	return ""
}

// pathIDSAS names a SAS disk by the phy it hangs off ("sas-phy3-lun-0"),
// by expander and phy ("sas-exp0x500...-phy3-lun-0"), or on a wide port by
// its SAS address ("sas-0x5000...-lun-0").
func pathIDSAS(r Sys, p, lunStr string, prepend func(string)) (string, bool) {
	tgt := ancestorMatching(p, isSCSITarget)
	if tgt == "" {
		return "", false
	}
	endDev := path.Dir(tgt)
	port := path.Dir(endDev)
	if !ClassExists(r, "sas_device", path.Base(endDev), endDev) {
		return "", false
	}
	phys, ok := ClassAttr(r, "sas_port", path.Base(port), port, "num_phys")
	if !ok {
		return "", false
	}
	if phys != "1" {
		addr, ok := ClassAttr(r, "sas_device", path.Base(endDev), endDev, "sas_address")
		if !ok {
			return "", false
		}
		prepend("sas-" + addr + "-" + lunStr)
		return p, true
	}
	phy, ok := ClassAttr(r, "sas_device", path.Base(endDev), endDev, "phy_identifier")
	if !ok {
		return "", false
	}
	exp := path.Dir(port)
	if ClassExists(r, "sas_device", path.Base(exp), exp) {
		addr, ok := ClassAttr(r, "sas_device", path.Base(exp), exp, "sas_address")
		if !ok {
			return "", false
		}
		prepend("sas-exp" + addr + "-phy" + phy + "-" + lunStr)
		return p, true
	}
	prepend("sas-phy" + phy + "-" + lunStr)
	return p, true
}

// pathIDISCSI names an iSCSI disk by portal and target
// ("ip-192.0.2.1:3260-iscsi-iqn...-lun-0").
func pathIDISCSI(r Sys, p, lunStr string, prepend func(string)) (string, bool) {
	sess := ""
	for q := path.Dir(p); strings.HasPrefix(q, "sys/devices/"); q = path.Dir(q) {
		if strings.HasPrefix(path.Base(q), "session") {
			sess = q
			break
		}
	}
	if sess == "" {
		return "", false
	}
	name := path.Base(sess)
	target, ok := ClassAttr(r, "iscsi_session", name, sess, "targetname")
	if !ok {
		return "", false
	}
	num := strings.TrimPrefix(name, "session")
	conn := "connection" + num + ":0"
	connOwner := sess + "/" + conn
	addr, ok1 := ClassAttr(r, "iscsi_connection", conn, connOwner, "persistent_address")
	port, ok2 := ClassAttr(r, "iscsi_connection", conn, connOwner, "persistent_port")
	if !ok1 || !ok2 {
		return "", false
	}
	prepend("ip-" + addr + ":" + port + "-iscsi-" + target + "-" + lunStr)
	return p, true
}

// nvmeCtrlName is the controller part of an NVMe disk name: "nvme0" for
// "nvme0n1" (kernel naming nvme<ctrl>[c<path>]n<ns>).
func nvmeCtrlName(disk string) string {
	rest := strings.TrimPrefix(disk, "nvme")
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	return "nvme" + rest[:i]
}
