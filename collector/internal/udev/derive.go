package udev

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Sys reads the machine's sysfs below one root directory. Paths are
// slash-separated and relative to the root ("sys/block/sda/size"); links
// resolve inside the root.
type Sys interface {
	// Read returns a file's bytes: fs.ErrNotExist, without a warning, when
	// it is missing; any other failure is warned about and returned.
	Read(rel string) ([]byte, error)
	// Attr reads a text attribute without its trailing newline; ok is
	// false when the file is missing or unreadable.
	Attr(rel string) (string, bool)
	// Entries lists a directory's names, sorted; nil when it does not
	// exist.
	Entries(rel string) []string
	// Readlink returns a symlink's target as stored.
	Readlink(rel string) (string, bool)
	// Resolve follows every symlink and returns the canonical
	// root-relative path.
	Resolve(rel string) (string, error)
	// IsDir tells whether a path is a directory (following links).
	IsDir(rel string) bool
	// Warn logs, once per file, why a value read from rel is unknown.
	Warn(rel, reason string)
}

// Device is a block device as the rules see it.
type Device struct {
	Name    string // kernel name, e.g. "sda"
	Base    string // root-relative sysfs dir, e.g. "sys/block/sda"
	DevPath string // canonical sysfs path below sys/devices ("" if unknown)
	IsPart  bool   // a partition
}

// Props computes, from sysfs alone, the udev properties IPA and lsblk
// read: what Debian bookworm's rules (60-persistent-storage.rules with
// ata_id, scsi_id and the path_id builtin, and multipath-tools'
// 56-dm-mpath.rules with kpartx_id) would have stored for the device.
// probe finds another block device by kernel name (a partition's disk).
func Props(r Sys, d Device, probe func(name string) (Device, bool)) map[string]string {
	return deriver{r: r, probe: probe}.props(d)
}

type deriver struct {
	r     Sys
	probe func(name string) (Device, bool)
}

func (c deriver) props(d Device) map[string]string {
	p := map[string]string{}
	if d.IsPart {
		return c.derivePartition(d)
	}
	if d.DevPath != "" {
		if id, ok := PathID(c.r, d.DevPath); ok {
			p["ID_PATH"] = id.Path
			if id.Compat != "" {
				p["ID_PATH_ATA_COMPAT"] = id.Compat
			}
		}
	}
	switch n := d.Name; {
	case strings.HasPrefix(n, "dm-"):
		c.deriveDM(d, p)
	case strings.HasPrefix(n, "nvme"):
		c.deriveNVMe(d, p)
	case strings.HasPrefix(n, "vd"):
		if v := udevAttrValue(c.attrOrEmpty(d.Base + "/serial")); v != "" {
			p["ID_SERIAL"] = v
		}
	case strings.HasPrefix(n, "mmcblk"):
		if v := udevAttrValue(c.attrOrEmpty(d.Base + "/device/serial")); v != "" {
			p["ID_SERIAL"] = v
		}
	case strings.HasPrefix(n, "sd"), strings.HasPrefix(n, "sr"):
		c.deriveSCSI(d, p)
	}
	return p
}

func (c deriver) attrOrEmpty(rel string) string {
	v, _ := c.r.Attr(rel)
	return v
}

// derivePartition gives a partition its disk's ID_* properties (udev
// imports them from the parent) and the "-part<N>" by-path name.
func (c deriver) derivePartition(d Device) map[string]string {
	p := map[string]string{}
	if d.DevPath == "" {
		return p
	}
	parent, ok := c.probe(path.Base(path.Dir(d.DevPath)))
	if !ok {
		return p
	}
	for k, v := range c.props(parent) {
		if strings.HasPrefix(k, "ID_") && !strings.HasPrefix(k, "ID_FS") {
			p[k] = v
		}
	}
	n := strings.TrimSpace(c.attrOrEmpty(d.Base + "/partition"))
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
func (c deriver) deriveNVMe(d Device, p map[string]string) {
	if v := udevAttrValue(c.attrOrEmpty(d.Base + "/device/serial")); v != "" {
		p["ID_SERIAL_SHORT"] = v
	}
	wwid, ok := c.r.Attr(d.Base + "/wwid")
	if !ok {
		wwid = c.attrOrEmpty(d.Base + "/device/wwid")
	}
	if v := udevAttrValue(wwid); v != "" {
		p["ID_WWN"] = v
	}
	if v := udevAttrValue(c.attrOrEmpty(d.Base + "/device/model")); v != "" {
		p["ID_MODEL"] = v
	}
}

// deriveDM: kpartx_id names a multipath map after its dm UUID
// ("mpath-<scsi_id serial>"): DM_SERIAL is the serial, and DM_WWN is the
// serial without its designator-type digit, for maps over SCSI paths.
func (c deriver) deriveDM(d Device, p map[string]string) {
	uuid, ok := c.r.Attr(d.Base + "/dm/uuid")
	if !ok {
		return
	}
	tbl, serial, ok := strings.Cut(uuid, "-")
	if !ok || tbl != "mpath" || serial == "" {
		return
	}
	p["DM_SERIAL"] = serial
	var majors []string
	for _, s := range c.r.Entries(d.Base + "/slaves") {
		devno, ok := c.r.Attr(d.Base + "/slaves/" + s + "/dev")
		if !ok {
			devno, ok = c.r.Attr("sys/block/" + s + "/dev")
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
func (c deriver) deriveSCSI(d Device, p map[string]string) {
	dev := d.Base + "/device"
	vendor := c.attrOrEmpty(dev + "/vendor")
	model := c.attrOrEmpty(dev + "/model")
	if usb := USBDevice(c.r, d.DevPath); usb != "" {
		// A fixed disk in a USB enclosure first gets ata_id (through SAT);
		// otherwise usb_id names the disk and scsi_id never runs.
		removable := strings.TrimSpace(c.attrOrEmpty(d.Base + "/removable"))
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
	p["ID_MODEL_ENC"] = Encode(model)
	p["ID_MODEL"] = udevReplaceChars(ReplaceWhitespace(model), "")

	var id scsiIdent
	have := false
	page83, err83 := c.r.Read(dev + "/vpd_pg83")
	page80, err80 := c.r.Read(dev + "/vpd_pg80")
	var unitSerial string
	haveUnitSerial := false
	if err80 == nil {
		s, err := parseVPD80(page80)
		if err != nil {
			c.r.Warn(dev+"/vpd_pg80", err.Error())
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
			c.r.Warn(dev+"/vpd_pg83", err.Error())
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
		if w, ok := c.r.Attr(dev + "/wwid"); ok {
			if hex, ok := strings.CutPrefix(strings.TrimSpace(w), "naa."); ok && isHexString(hex) {
				id.WWN, id.WWNExt = cut(strings.ToLower(hex), 0, 16), cut(strings.ToLower(hex), 16, 32)
			}
		}
	}
	if have {
		p["ID_SERIAL"] = udevReplaceChars(ReplaceWhitespace(id.Serial), "")
		p["ID_SERIAL_SHORT"] = udevReplaceChars(ReplaceWhitespace(id.SerialShort), "")
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
func (c deriver) deriveATA(d Device, p map[string]string, sysModel string, needIdentify bool) bool {
	dev := d.Base + "/device"
	var model, serial string
	var identify []byte
	if page, err := c.r.Read(dev + "/vpd_pg89"); err == nil {
		ident, perr := parseVPD89(page)
		if perr != nil {
			c.r.Warn(dev+"/vpd_pg89", perr.Error())
		} else {
			model, serial = ident.Model, ident.Serial
			identify = page[60 : 60+512]
		}
	}
	if identify == nil && needIdentify {
		return false
	}
	if identify == nil {
		page, err := c.r.Read(dev + "/vpd_pg80")
		if err != nil {
			return false
		}
		s, perr := parseVPD80(page)
		if perr != nil {
			c.r.Warn(dev+"/vpd_pg80", perr.Error())
			return false
		}
		model, serial = sysModel, s
	}
	cleanModel := udevReplaceChars(ReplaceWhitespace(model), "")
	cleanSerial := udevReplaceChars(ReplaceWhitespace(serial), "")
	p["ID_ATA"] = "1"
	p["ID_BUS"] = "ata"
	p["ID_MODEL"] = cleanModel
	p["ID_MODEL_ENC"] = Encode(model)
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
func (c deriver) ataWWN(dev string, identify []byte) string {
	if page, err := c.r.Read(dev + "/vpd_pg83"); err == nil {
		ds, perr := parseVPD83(page)
		if perr != nil {
			c.r.Warn(dev+"/vpd_pg83", perr.Error())
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

// USBDevice returns the USB device (not interface) the disk whose
// canonical sysfs path is devPath hangs off, or "" when it is not on USB.
func USBDevice(r Sys, devPath string) string {
	for p := devParent(devPath); p != ""; p = devParent(p) {
		if subsystem(r, p) == "usb" && strings.Contains(path.Base(p), ":") {
			if up := devParent(p); up != "" && subsystem(r, up) == "usb" {
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
func (c deriver) deriveUSB(d Device, p map[string]string, usb, vendor, model string) {
	clean := func(s string) string { return udevReplaceChars(ReplaceWhitespace(s), "") }
	p["ID_BUS"] = "usb"
	p["ID_VENDOR"] = clean(vendor)
	p["ID_MODEL"] = clean(model)
	p["ID_MODEL_ENC"] = Encode(model)
	serial := ""
	if s, ok := c.r.Attr(usb + "/serial"); ok {
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
	if scsiDev, err := c.r.Resolve(d.Base + "/device"); err == nil {
		if hctl, ok := HCTL(path.Base(scsiDev)); ok {
			id += "-" + hctl[2] + ":" + hctl[3]
		}
	}
	p["ID_SERIAL"] = id
}
