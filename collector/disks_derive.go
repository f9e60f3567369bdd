package collector

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// deriveProps computes, from sysfs alone, the udev properties IPA and lsblk
// read: what Debian bookworm's rules (60-persistent-storage.rules with
// ata_id, scsi_id and the path_id builtin, and multipath-tools'
// 56-dm-mpath.rules with kpartx_id) would have stored for the device.
func (c *diskCollector) deriveProps(d *blockDev) map[string]string {
	p := map[string]string{}
	if d.isPart {
		return c.derivePartition(d)
	}
	if d.devPath != "" {
		if id, ok := c.r.pathID(d.devPath); ok {
			p["ID_PATH"] = id.Path
			if id.Compat != "" {
				p["ID_PATH_ATA_COMPAT"] = id.Compat
			}
		}
	}
	switch n := d.name; {
	case strings.HasPrefix(n, "dm-"):
		c.deriveDM(d, p)
	case strings.HasPrefix(n, "nvme"):
		c.deriveNVMe(d, p)
	case strings.HasPrefix(n, "vd"):
		if v := udevAttrValue(c.attrOrEmpty(d.base + "/serial")); v != "" {
			p["ID_SERIAL"] = v
		}
	case strings.HasPrefix(n, "mmcblk"):
		if v := udevAttrValue(c.attrOrEmpty(d.base + "/device/serial")); v != "" {
			p["ID_SERIAL"] = v
		}
	case strings.HasPrefix(n, "sd"), strings.HasPrefix(n, "sr"):
		c.deriveSCSI(d, p)
	}
	return p
}

func (c *diskCollector) attrOrEmpty(rel string) string {
	v, _ := c.r.attr(rel)
	return v
}

// derivePartition gives a partition its disk's ID_* properties (udev
// imports them from the parent) and the "-part<N>" by-path name.
func (c *diskCollector) derivePartition(d *blockDev) map[string]string {
	p := map[string]string{}
	if d.devPath == "" {
		return p
	}
	parent, ok := c.probe(path.Base(path.Dir(d.devPath)))
	if !ok {
		return p
	}
	for k, v := range c.deriveProps(parent) {
		if strings.HasPrefix(k, "ID_") && !strings.HasPrefix(k, "ID_FS") {
			p[k] = v
		}
	}
	n := strings.TrimSpace(c.attrOrEmpty(d.base + "/partition"))
	for _, k := range []string{"ID_PATH", "ID_PATH_ATA_COMPAT"} {
		if p[k] != "" {
			p[k] += "-part" + n
		}
	}
	return p
}

// deriveNVMe: the NVMe lines of 60-persistent-storage.rules copy the
// controller's (or NVMe subsystem's) serial and model and the namespace's
// wwid.
func (c *diskCollector) deriveNVMe(d *blockDev, p map[string]string) {
	if v := udevAttrValue(c.attrOrEmpty(d.base + "/device/serial")); v != "" {
		p["ID_SERIAL_SHORT"] = v
	}
	wwid, ok := c.r.attr(d.base + "/wwid")
	if !ok {
		wwid = c.attrOrEmpty(d.base + "/device/wwid")
	}
	if v := udevAttrValue(wwid); v != "" {
		p["ID_WWN"] = v
	}
	if v := udevAttrValue(c.attrOrEmpty(d.base + "/device/model")); v != "" {
		p["ID_MODEL"] = v
	}
}

// deriveDM: kpartx_id names a multipath map after its dm UUID
// ("mpath-<scsi_id serial>"): DM_SERIAL is the serial, and DM_WWN is the
// serial without its designator-type digit, for maps over SCSI paths.
func (c *diskCollector) deriveDM(d *blockDev, p map[string]string) {
	uuid, ok := c.r.attr(d.base + "/dm/uuid")
	if !ok {
		return
	}
	tbl, serial, ok := strings.Cut(uuid, "-")
	if !ok || tbl != "mpath" || serial == "" {
		return
	}
	p["DM_SERIAL"] = serial
	var majors []string
	for _, s := range c.r.entries(d.base + "/slaves") {
		devno, ok := c.r.attr(d.base + "/slaves/" + s + "/dev")
		if !ok {
			devno, ok = c.r.attr("sys/block/" + s + "/dev")
		}
		if !ok {
			continue
		}
		maj, _, _ := strings.Cut(strings.TrimSpace(devno), ":")
		majors = append(majors, maj)
	}
	if len(majors) == 0 {
		return // kpartx_id calls a map without dependencies "raid"
	}
	has := func(match func(string) bool) bool {
		for _, m := range majors {
			if match(m) {
				return true
			}
		}
		return false
	}
	switch {
	case has(func(m string) bool { return m == "94" }): // DASD
	case has(func(m string) bool { n, _ := strconv.Atoi(m); return (n >= 104 && n <= 110) || n == 112 }): // cciss
	case has(func(m string) bool { return strings.HasPrefix(m, "9") }): // md and friends
	default:
		p["DM_WWN"] = "0x" + serial[1:]
	}
}

// deriveSCSI reproduces ata_id for disks behind libata (vendor "ATA") and
// scsi_id for every other SCSI disk.
func (c *diskCollector) deriveSCSI(d *blockDev, p map[string]string) {
	dev := d.base + "/device"
	vendor := c.attrOrEmpty(dev + "/vendor")
	model := c.attrOrEmpty(dev + "/model")
	if usb := c.usbDevice(d); usb != "" {
		// A fixed disk in a USB enclosure first gets ata_id (through SAT);
		// otherwise usb_id names the disk and scsi_id never runs.
		removable := strings.TrimSpace(c.attrOrEmpty(d.base + "/removable"))
		if removable == "0" && c.deriveATA(d, p, model, true) {
			return
		}
		c.deriveUSB(d, p, usb, vendor, model)
		return
	}
	if strings.TrimRight(vendor, " \t\n") == "ATA" && c.deriveATA(d, p, model, false) {
		return
	}
	// Encoded and cleaned model as scsi_id exports them from the standard
	// INQUIRY data, which sysfs shows as device/model.
	p["ID_MODEL_ENC"] = udevEncode(model)
	p["ID_MODEL"] = udevReplaceChars(udevReplaceWhitespace(model), "")

	var id scsiIdent
	have := false
	page83, err83 := c.r.read(dev + "/vpd_pg83")
	page80, err80 := c.r.read(dev + "/vpd_pg80")
	var unitSerial string
	haveUnitSerial := false
	if err80 == nil {
		s, err := parseVPD80(page80)
		if err != nil {
			c.r.warnOnce(dev+"/vpd_pg80", err.Error())
		} else {
			unitSerial, haveUnitSerial = s, true
		}
	}
	if err83 == nil {
		var err error
		id, err = scsiIDFromVPD83(page83, padTo(vendor, 8), padTo(model, 16))
		switch {
		case err == nil:
			have = true
		case errors.Is(err, errNoDesignator):
		default:
			c.r.warnOnce(dev+"/vpd_pg83", err.Error())
		}
		// scsi_id reads page 0x80 as part of its page 0x83 inquiry and
		// exports it as ID_SCSI_SERIAL, which lsblk prefers.
		if haveUnitSerial && strings.TrimSpace(unitSerial) != "" {
			p["ID_SCSI_SERIAL"] = strings.TrimSpace(unitSerial)
		}
	}
	if !have && haveUnitSerial {
		// No usable page 0x83: scsi_id falls back to page 0x80.
		id = scsiIdent{Serial: "S" + padTo(vendor, 8) + padTo(model, 16) + unitSerial, SerialShort: unitSerial}
		have = true
	}
	if errors.Is(err83, fs.ErrNotExist) && id.WWN == "" {
		// No page 0x83 in sysfs (older kernels): the kernel's wwid, when it
		// is an NAA name, carries the same identifier.
		if w, ok := c.r.attr(dev + "/wwid"); ok {
			if hex, ok := strings.CutPrefix(strings.TrimSpace(w), "naa."); ok && isHexString(hex) {
				id.WWN, id.WWNExt = cut(strings.ToLower(hex), 0, 16), cut(strings.ToLower(hex), 16, 32)
			}
		}
	}
	if have {
		p["ID_SERIAL"] = udevReplaceChars(udevReplaceWhitespace(id.Serial), "")
		p["ID_SERIAL_SHORT"] = udevReplaceChars(udevReplaceWhitespace(id.SerialShort), "")
	}
	if id.WWN != "" {
		p["ID_WWN"] = "0x" + id.WWN
		if id.WWNExt != "" {
			p["ID_WWN_VENDOR_EXTENSION"] = "0x" + id.WWNExt
			p["ID_WWN_WITH_EXTENSION"] = "0x" + id.WWN + id.WWNExt
		} else {
			p["ID_WWN_WITH_EXTENSION"] = "0x" + id.WWN
		}
	}
}

func isHexString(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

// deriveATA reproduces ata_id's export from the IDENTIFY data: libata's
// VPD page 0x89 carries it whole (full 40-character model); without that
// page, page 0x80 has the serial and sysfs the first 16 model characters.
// It reports false when neither source exists (then udev would have fallen
// back to scsi_id).
func (c *diskCollector) deriveATA(d *blockDev, p map[string]string, sysModel string, needIdentify bool) bool {
	dev := d.base + "/device"
	var model, serial string
	var identify []byte
	if page, err := c.r.read(dev + "/vpd_pg89"); err == nil {
		ident, perr := parseVPD89(page)
		if perr != nil {
			c.r.warnOnce(dev+"/vpd_pg89", perr.Error())
		} else {
			model, serial = ident.Model, ident.Serial
			identify = page[60 : 60+512]
		}
	}
	if identify == nil && needIdentify {
		return false
	}
	if identify == nil {
		page, err := c.r.read(dev + "/vpd_pg80")
		if err != nil {
			return false
		}
		s, perr := parseVPD80(page)
		if perr != nil {
			c.r.warnOnce(dev+"/vpd_pg80", perr.Error())
			return false
		}
		model, serial = sysModel, s
	}
	cleanModel := udevReplaceChars(udevReplaceWhitespace(model), "")
	cleanSerial := udevReplaceChars(udevReplaceWhitespace(serial), "")
	p["ID_ATA"] = "1"
	p["ID_BUS"] = "ata"
	p["ID_MODEL"] = cleanModel
	p["ID_MODEL_ENC"] = udevEncode(model)
	if cleanSerial != "" {
		p["ID_SERIAL"] = cleanModel + "_" + cleanSerial
		p["ID_SERIAL_SHORT"] = cleanSerial
	} else {
		p["ID_SERIAL"] = cleanModel
	}
	if wwn := c.ataWWN(dev, identify); wwn != "" {
		p["ID_WWN"] = wwn
		p["ID_WWN_WITH_EXTENSION"] = wwn
	}
	return true
}

// ataWWN is ata_id's ID_WWN ("0x%lx" of IDENTIFY words 108-111): libata
// puts the same 8 bytes into page 0x83 as an NAA designator.
func (c *diskCollector) ataWWN(dev string, identify []byte) string {
	if page, err := c.r.read(dev + "/vpd_pg83"); err == nil {
		ds, perr := parseVPD83(page)
		if perr != nil {
			c.r.warnOnce(dev+"/vpd_pg83", perr.Error())
		}
		for _, d := range ds {
			if d.Type == desigNAA && d.CodeSet == codeSetBinary && d.Association == 0 && len(d.Value) == 8 {
				return "0x" + strconv.FormatUint(binary.BigEndian.Uint64(d.Value), 16)
			}
		}
		if perr == nil {
			return ""
		}
	}
	if len(identify) == 512 {
		w := func(i int) uint64 { return uint64(binary.LittleEndian.Uint16(identify[2*i:])) }
		if w(87)&0xc100 == 0x4100 {
			if v := w(108)<<48 | w(109)<<32 | w(110)<<16 | w(111); v != 0 {
				return "0x" + strconv.FormatUint(v, 16)
			}
		}
	}
	return ""
}

// usbDevice returns the USB device (not interface) a disk hangs off, or ""
// when it is not on USB.
func (c *diskCollector) usbDevice(d *blockDev) string {
	for p := devParent(d.devPath); p != ""; p = devParent(p) {
		if c.r.subsystem(p) == "usb" && strings.Contains(path.Base(p), ":") {
			if up := devParent(p); up != "" && c.r.subsystem(up) == "usb" {
				return up
			}
			return ""
		}
	}
	return ""
}

// deriveUSB reproduces udev's usb_id builtin (systemd 252) for a USB mass
// storage disk: vendor and model from the SCSI INQUIRY data, the serial
// from the USB device descriptor, ID_SERIAL as vendor_model_serial-target:lun.
// No WWN: scsi_id does not run once usb_id has set ID_SERIAL.
func (c *diskCollector) deriveUSB(d *blockDev, p map[string]string, usb, vendor, model string) {
	clean := func(s string) string { return udevReplaceChars(udevReplaceWhitespace(s), "") }
	p["ID_BUS"] = "usb"
	p["ID_VENDOR"] = clean(vendor)
	p["ID_MODEL"] = clean(model)
	p["ID_MODEL_ENC"] = udevEncode(model)
	serial := ""
	if s, ok := c.r.attr(usb + "/serial"); ok {
		// usb_id ignores serials with control, non-ASCII or ',' bytes.
		valid := true
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] > 0x7f || s[i] == ',' {
				valid = false
				break
			}
		}
		if valid {
			serial = clean(s)
		}
	}
	id := p["ID_VENDOR"] + "_" + p["ID_MODEL"]
	if serial != "" {
		id += "_" + serial
		p["ID_SERIAL_SHORT"] = serial
	}
	if scsiDev, err := c.r.resolve(d.base + "/device"); err == nil {
		if m := reHCTL.FindStringSubmatch(path.Base(scsiDev)); m != nil {
			id += "-" + m[3] + ":" + m[4]
		}
	}
	p["ID_SERIAL"] = id
}
