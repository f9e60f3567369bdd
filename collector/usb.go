package collector

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// USBDevice is one entry of the inspection data's "usb_devices" (IPA's
// usb-devices collector, IPA 9.8+; the keys and their order are IPA's
// USBInfo).
type USBDevice struct {
	Product string `json:"product"`
	Vendor  string `json:"vendor"`
	Handle  string `json:"handle"`
}

// IPA takes the USB devices from `lshw -json`: the nodes whose id is
// exactly "usb" and whose class is "generic". We read the same facts from
// sysfs (sys/bus/usb/devices), field by field:
//
//   - which devices: lshw makes a node for every device below a root hub
//     (root hubs are "usbhost" nodes, class bus). It names a node "usb"
//     only when it is the single device on its hub: siblings become
//     "usb:0", "usb:1", ..., which IPA's exact id match skips. So a device
//     is listed when it is the only one on its parent hub.
//   - class: lshw's from bDeviceClass, else from the interfaces
//     (bInterfaceClass of the active configuration, by interface number),
//     the first that names a class: audio and video are multimedia,
//     communications and wireless communication, HID input, printer,
//     mass storage storage, hub bus; anything else (vendor-specific,
//     CDC data, smart card, imaging, ...) stays generic.
//   - vendor: the device's manufacturer string (sysfs "manufacturer"),
//     else the vendor name of idVendor in usb.ids when one is below the
//     root (lshw's search path), else "". lshw keeps only the string's
//     leading characters from space to 'z' (at most 80), trimmed.
//   - product: the same with the "product" string and idVendor:idProduct.
//   - handle: "USB:<busnum>:<devnum>", as lshw's.
//
// Where it can differ from IPA: lshw reads /sys/kernel/debug/usb/devices
// (or /proc/bus/usb/devices), so a ramdisk without debugfs makes IPA send
// []; lshw's list follows its device tree (PCI controllers, then ports),
// ours the bus number and port path, which agree unless bus numbers are
// out of PCI order; and usb.ids entries are taken from the first file
// found, where lshw merges every file of its path.

// USBDevices lists the devices IPA's usb-devices collector reports, read
// from sys/bus/usb/devices below opts.Root. A machine without USB (no such
// directory) has none; another error reading the directory is returned.
func USBDevices(ctx context.Context, opts Options) ([]USBDevice, error) {
	return usbDevices(ctx, opts.fs())
}

// collectUSBDevices is the usb_devices unit (see inspectionUnits).
func collectUSBDevices(ctx context.Context, c *collection) error {
	_, err := usbDevices(ctx, c.fs)
	return err
}

// usbNode is one USB device (not a root hub, not an interface).
type usbNode struct {
	name   string // sysfs name: "1-1.4"
	parent string // the hub it hangs off: "1-1", or "usb1" for a root port
	bus    int
	ports  []int
}

func usbDevices(ctx context.Context, f rootFS) ([]USBDevice, error) {
	const dir = "sys/bus/usb/devices"
	ents, err := f.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []USBDevice{}, nil
	}
	if err != nil {
		return nil, err
	}
	var nodes []usbNode
	children := map[string]int{}
	for _, e := range ents {
		n, ok := parseUSBDeviceName(e.Name())
		if !ok {
			continue // root hubs (usbN), interfaces (1-1:1.0), stray names
		}
		nodes = append(nodes, n)
		children[n.parent]++
	}
	// lshw's tree order: by bus, then depth first along the port path.
	slices.SortFunc(nodes, func(a, b usbNode) int {
		return cmp.Or(cmp.Compare(a.bus, b.bus), slices.Compare(a.ports, b.ports))
	})
	var ids *usbIDs
	out := []USBDevice{}
	for _, n := range nodes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if children[n.parent] != 1 {
			continue // lshw renamed it "usb:N"
		}
		p := path.Join(dir, n.name)
		if usbClass(f, p, n.name) != "generic" {
			continue
		}
		busnum, err1 := f.ReadString(path.Join(p, "busnum"))
		devnum, err2 := f.ReadString(path.Join(p, "devnum"))
		if err1 != nil || err2 != nil {
			continue // lshw has no node for a device debugfs cannot list
		}
		dev := USBDevice{Handle: "USB:" + busnum + ":" + devnum}
		vendor, errV := usbHexFile(f, path.Join(p, "idVendor"))
		product, errP := usbHexFile(f, path.Join(p, "idProduct"))
		if errV == nil {
			if ids == nil {
				ids = loadUSBIDs(f)
			}
			if name, ok := ids.vendors[vendor]; ok {
				dev.Vendor = name
				if errP == nil {
					dev.Product = ids.products[[2]uint16{vendor, product}]
				}
			}
		}
		if s, err := f.ReadFile(path.Join(p, "manufacturer")); err == nil {
			dev.Vendor = lshwUSBString(s)
		}
		if s, err := f.ReadFile(path.Join(p, "product")); err == nil {
			dev.Product = lshwUSBString(s)
		}
		out = append(out, dev)
	}
	return out, nil
}

// parseUSBDeviceName parses a USB device's sysfs name, "<bus>-<port>[.<port>...]".
func parseUSBDeviceName(name string) (usbNode, bool) {
	busText, portText, ok := strings.Cut(name, "-")
	if !ok || strings.Contains(portText, ":") {
		return usbNode{}, false
	}
	bus, err := strconv.Atoi(busText)
	if err != nil || bus < 0 {
		return usbNode{}, false
	}
	n := usbNode{name: name, bus: bus, parent: "usb" + busText}
	for p := range strings.SplitSeq(portText, ".") {
		port, err := strconv.Atoi(p)
		if err != nil || port < 0 {
			return usbNode{}, false
		}
		n.ports = append(n.ports, port)
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		n.parent = name[:i]
	}
	return n, true
}

// usbClass is lshw's class of the device in directory p (sysfs name name):
// the device class if it names one, else the first interface's that does.
func usbClass(f rootFS, p, name string) string {
	if c, err := usbHexFile(f, path.Join(p, "bDeviceClass")); err == nil {
		if class := lshwUSBClass(c); class != "generic" {
			return class
		}
	}
	ents, err := f.ReadDir(p)
	if err != nil {
		return "generic"
	}
	type iface struct {
		num   int
		class string
	}
	var ifaces []iface
	for _, e := range ents {
		// "<name>:<config>.<interface>"
		rest, ok := strings.CutPrefix(e.Name(), name+":")
		if !ok {
			continue
		}
		_, num, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			continue
		}
		c, err := usbHexFile(f, path.Join(p, e.Name(), "bInterfaceClass"))
		if err != nil {
			continue
		}
		ifaces = append(ifaces, iface{n, lshwUSBClass(c)})
	}
	slices.SortFunc(ifaces, func(a, b iface) int { return cmp.Compare(a.num, b.num) })
	for _, i := range ifaces {
		if i.class != "generic" {
			return i.class
		}
	}
	return "generic"
}

// lshwUSBClass maps a USB class code to lshw's node class (usb.cc's
// setUSBClass).
func lshwUSBClass(code uint16) string {
	switch code {
	case 0x01, 0x0E: // audio, video
		return "multimedia"
	case 0x02, 0xE0: // communications, wireless controller
		return "communication"
	case 0x03:
		return "input"
	case 0x07:
		return "printer"
	case 0x08:
		return "storage"
	case 0x09:
		return "bus"
	}
	return "generic"
}

// usbHexFile reads a sysfs attribute holding a bare hex number ("0bda",
// "09").
func usbHexFile(f rootFS, rel string) (uint16, error) {
	s, err := f.ReadString(rel)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(s, 16, 16)
	return uint16(v), err
}

// lshwUSBString is what lshw keeps of a USB string descriptor: sscanf's
// %80[ -z] (the leading run of characters from space to 'z', at most 80)
// then hw::strip (surrounding bytes up to space removed).
func lshwUSBString(b []byte) string {
	b = bytes.TrimSuffix(b, []byte("\n")) // sysfs's line end, not part of the string
	n := 0
	for n < len(b) && n < 80 && b[n] >= ' ' && b[n] <= 'z' {
		n++
	}
	return string(bytes.Trim(b[:n], " "))
}

// usbIDs is the part of a usb.ids file lshw uses: vendor and product names.
type usbIDs struct {
	vendors  map[uint16]string
	products map[[2]uint16]string
}

// loadUSBIDs reads the first usb.ids of lshw's search path below the root;
// without one every lookup misses, as lshw's does.
func loadUSBIDs(f rootFS) *usbIDs {
	for _, p := range []string{
		"usr/share/lshw-common/usb.ids", "usr/share/lshw/usb.ids", "usr/local/share/usb.ids", "usr/share/usb.ids", "etc/usb.ids",
		"usr/share/hwdata/usb.ids", "usr/share/misc/usb.ids",
	} {
		if b, err := f.ReadFile(p); err == nil {
			return parseUSBIDs(b)
		}
	}
	return parseUSBIDs(nil)
}

// parseUSBIDs parses usb.ids as lshw's load_usbids does: a line starting
// with four hex digits names a vendor, a tab then four hex digits a
// product of the last vendor; every other line is skipped.
func parseUSBIDs(b []byte) *usbIDs {
	ids := &usbIDs{vendors: map[uint16]string{}, products: map[[2]uint16]string{}}
	var vendor uint16
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		product := strings.HasPrefix(line, "\t")
		if product {
			line = line[1:]
		}
		if len(line) < 4 {
			continue
		}
		id, err := strconv.ParseUint(line[:4], 16, 16)
		if err != nil {
			continue
		}
		name := strings.Trim(line[4:], " \t\r")
		if product {
			ids.products[[2]uint16{vendor, uint16(id)}] = name
		} else {
			vendor = uint16(id)
			ids.vendors[vendor] = name
		}
	}
	return ids
}
