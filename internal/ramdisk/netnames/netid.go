package netnames

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ID is what udev knows of one network interface when it names it: the
// net_id builtin's properties and the few others the naming rules read.
type ID struct {
	// Interface is the kernel's name; Dev the device's directory below the
	// sysfs root (devices/...).
	Interface, Dev string
	// Scheme is ID_NET_NAMING_SCHEME ("" when net_id does not name this
	// kind of link: stacked links, loopback, tunnels).
	Scheme string
	// Onboard, Slot, Path and MAC are ID_NET_NAME_ONBOARD, _SLOT, _PATH
	// and _MAC; "" when net_id sets none.
	Onboard, Slot, Path, MAC string
	// Database is ID_NET_NAME_FROM_DATABASE (udev's hwdb).
	Database string
	// Special is the NAME= of udev's 73-special-net-names.rules (a BMC's
	// USB NIC), which wins over every policy.
	Special string
	// USB: the device hangs off a USB bus (73-usb-net-by-mac.link's
	// Path=*-usb-*).
	USB bool
	// NameAssignType is the kernel's name_assign_type (NET_NAME_*; 0 when
	// unreadable).
	NameAssignType int
}

// ARPHRD_* and the kernel's name_assign_type values.
const (
	arphrdEther      = 1
	arphrdInfiniband = 32
	arphrdSLIP       = 256

	NameEnum        = 1 // NET_NAME_ENUM: eth0, the kernel's count
	NamePredictable = 2 // NET_NAME_PREDICTABLE: the kernel's own stable name
	NameUser        = 3 // NET_NAME_USER: named by its creator
	NameRenamed     = 4 // NET_NAME_RENAMED: renamed since
)

// onboard index limits (systemd's ONBOARD_14BIT_INDEX_MAX and _16BIT_).
const (
	onboardMax14 = 1<<14 - 1
	onboardMax16 = 1<<16 - 1
)

// specialUSB are 73-special-net-names.rules' NAME= for BMCs' USB NICs; the
// first is hwdb's ID_NET_NAME_FROM_DATABASE too (20-net-ifname.hwdb).
var specialUSB = []struct {
	vendor, product, name string
	database              bool
}{
	{"413c", "a102", "idrac", true},   // Dell iDRAC
	{"04b3", "0325", "ibmimm", false}, // IBM/Lenovo IMM
}

// Compute returns what udev knows of interface ifname in the sysfs tree
// below sysRoot under scheme. An error means the interface cannot be read
// at all (no class/net entry); a name net_id cannot compute is left "", as
// udev leaves the property unset.
func Compute(sysRoot, ifname string, scheme Scheme) (ID, error) {
	return compute(sysfs{root: sysRoot}, ifname, scheme)
}

func compute(s sysfs, ifname string, scheme Scheme) (ID, error) {
	if ifname == "" || strings.ContainsAny(ifname, "/") || ifname == "." || ifname == ".." {
		return ID{}, fmt.Errorf("netnames: interface name %q is not one", ifname)
	}
	s.seen("class/net/"+ifname, false)
	dev, err := s.resolve("class/net/" + ifname)
	if err != nil {
		return ID{}, fmt.Errorf("netnames: %s: %w", ifname, err)
	}
	id := ID{Interface: ifname, Dev: dev}
	if v, ok := s.read(dev, "name_assign_type"); ok {
		id.NameAssignType, _ = strconv.Atoi(strings.TrimSpace(v))
	}
	id.USB = s.ancestor(dev, "usb", "") != ""
	for p := s.parent(dev); p != ""; p = s.parent(p) {
		vendor, _ := s.read(p, "idVendor")
		product, _ := s.read(p, "idProduct")
		for _, sp := range specialUSB {
			if vendor == sp.vendor && product == sp.product && s.subsystem(p) == "usb" {
				id.Special = sp.name
				if sp.database {
					id.Database = sp.name
				}
			}
		}
	}
	n := netID{s: s, dev: dev, scheme: scheme, id: &id}
	n.run()
	return id, nil
}

// netID is one run of udev's net_id builtin (src/udev/udev-builtin-net_id.c)
// on one interface.
type netID struct {
	s      sysfs
	dev    string
	scheme Scheme
	id     *ID
	prefix string
}

func (n *netID) run() {
	// Stacked links (VLANs, ...) are named by whoever made them.
	ifindex, ok := n.s.uevent(n.dev, "IFINDEX")
	if !ok {
		ifindex, ok = n.s.read(n.dev, "ifindex")
	}
	iflink, ok2 := n.s.read(n.dev, "iflink")
	if !ok || !ok2 {
		return
	}
	a, err1 := parseInt(ifindex)
	b, err2 := parseInt(iflink)
	if err1 != nil || err2 != nil || a != b {
		return
	}
	if !n.setPrefix() {
		return
	}
	n.id.Scheme = n.scheme.Name
	n.mac()
	n.platform()
	n.xen()
	n.pci()
	n.usb()
}

func (n *netID) setPrefix() bool {
	t, ok := n.s.read(n.dev, "type")
	if !ok {
		return false
	}
	v, err := parseUnsigned(t)
	if err != nil {
		return false
	}
	switch v {
	case arphrdEther:
		switch dt, _ := n.s.uevent(n.dev, "DEVTYPE"); dt {
		case "wlan":
			n.prefix = "wl"
		case "wwan":
			n.prefix = "ww"
		default:
			n.prefix = "en"
		}
	case arphrdInfiniband:
		if !n.scheme.has(flagInfiniband) {
			return false
		}
		n.prefix = "ib"
	case arphrdSLIP:
		n.prefix = "sl"
	default:
		return false
	}
	return true
}

// mac is ID_NET_NAME_MAC: the permanent MAC of an Ethernet-sized address.
func (n *netID) mac() {
	if n.prefix == "ib" {
		return
	}
	at, ok := n.s.read(n.dev, "addr_assign_type")
	if !ok {
		return
	}
	if v, err := parseUnsigned(at); err != nil || v != 0 { // NET_ADDR_PERM
		return
	}
	addr, ok := n.s.read(n.dev, "address")
	if !ok {
		return
	}
	hw, ok := parseHWAddr(addr)
	if !ok || len(hw) != 6 {
		return
	}
	n.id.MAC = fmt.Sprintf("%sx%02x%02x%02x%02x%02x%02x", n.prefix, hw[0], hw[1], hw[2], hw[3], hw[4], hw[5])
}

// parseHWAddr reads a colon-separated hardware address as sysfs writes it.
func parseHWAddr(s string) ([]byte, bool) {
	var out []byte
	for p := range strings.SplitSeq(s, ":") {
		if len(p) != 2 {
			return nil, false
		}
		v, err := strconv.ParseUint(p, 16, 8)
		if err != nil {
			return nil, false
		}
		out = append(out, byte(v))
	}
	return out, len(out) > 0
}

// firstComponent returns the path component of dev right below prefix
// (devices/platform/HISI00C2:00/... -> HISI00C2:00).
func firstComponent(dev, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(dev, prefix)
	if !ok {
		return "", false
	}
	c, _, _ := strings.Cut(rest, "/")
	return c, c != ""
}

// platform is the ACPI name of an ARM64 platform device (e.g. HISI00C2:00
// -> enahisic2i0).
func (n *netID) platform() {
	if n.s.subsystem(n.s.parent(n.dev)) != "platform" {
		return
	}
	p, ok := firstComponent(n.dev, "devices/platform/")
	if !ok {
		return
	}
	var vendor, model, instance string
	var valid func(r byte) bool
	switch {
	case len(p) == 10 && p[7] == ':':
		vendor, model, instance = p[:3], p[3:7], p[8:10]
		valid = func(r byte) bool { return r >= 'A' && r <= 'Z' }
	case len(p) == 11 && p[8] == ':':
		vendor, model, instance = p[:4], p[4:8], p[9:11]
		valid = func(r byte) bool { return r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' }
	default:
		return
	}
	for i := range len(vendor) {
		if !valid(vendor[i]) {
			return
		}
	}
	m, err1 := parseUnsignedBase(model, 16)
	in, err2 := parseUnsignedBase(instance, 16)
	if err1 != nil || err2 != nil {
		return
	}
	n.id.Path = fmt.Sprintf("%sa%s%xi%d", n.prefix, strings.ToLower(vendor), m, in)
}

// xen is the slot name of a Xen netfront device (vif-N -> enXN).
func (n *netID) xen() {
	if !n.scheme.has(flagXenVIF) || n.s.subsystem(n.s.parent(n.dev)) != "xen" {
		return
	}
	vif, ok := firstComponent(n.dev, "devices/")
	if !ok {
		return
	}
	num, ok := strings.CutPrefix(vif, "vif-")
	if !ok || num == "" || (len(num) > 1 && num[0] == '0') {
		return
	}
	v, err := parseUnsignedBase(num, 10)
	if err != nil {
		return
	}
	n.id.Slot = fmt.Sprintf("%sX%d", n.prefix, v)
}

// pci names a NIC whose device is a PCI function (a virtio device's
// parent counts): onboard index, slot and path.
func (n *netID) pci() {
	parent := n.s.parent(n.dev)
	for parent != "" && n.s.subsystem(parent) == "virtio" {
		parent = n.s.parent(parent)
	}
	if parent == "" || n.s.subsystem(parent) != "pci" {
		return
	}
	suffix := ""
	if n.scheme.has(flagSRIOVV) {
		if pf, vf, ok := n.virtfn(parent); ok {
			parent, suffix = pf, vf
		}
	}
	n.pciOnboard(parent, suffix)
	n.pciSlot(parent, suffix)
}

// virtfn returns the physical function of SR-IOV virtual function pcidev
// and the "v<N>" suffix naming it.
func (n *netID) virtfn(pcidev string) (pf, suffix string, ok bool) {
	if !n.s.exists(pcidev, "physfn") {
		return "", "", false
	}
	pf, err := n.s.resolve(pcidev + "/physfn")
	if err != nil {
		return "", "", false
	}
	ents, err := n.s.list(pf)
	if err != nil {
		return "", "", false
	}
	for _, e := range ents {
		num, ok := strings.CutPrefix(e.Name(), "virtfn")
		if !ok || num == "" || strings.Trim(num, "0123456789") != "" {
			continue
		}
		if p, err := n.s.resolve(pf + "/" + e.Name()); err == nil && p == pcidev {
			return pf, "v" + num, true
		}
	}
	return "", "", false
}

var errNoPort = errors.New("no port")

// port is the port part of a name: n<phys_port_name>, r<VF> for an SR-IOV
// representor, d<dev_port> for the second and later ports of one PCI
// function, or "". An error means udev gives up on the name. The source
// reads an InfiniBand port from dev_id when dev_port is 0 (old kernels'
// IPoIB), but neither systemd 252's nor forky's 262's udevadm does so on
// a tree that has it (TestUdevadmAgrees), so neither does this.
func (n *netID) port() (string, error) {
	if ppn, ok := n.s.read(n.dev, "phys_port_name"); ok && ppn != "" {
		if n.scheme.has(flagSRIOVR) {
			if vf, ok := representorVF(ppn); ok {
				return "r" + strconv.Itoa(vf), nil
			}
		}
		if !utf8.ValidString(ppn) || strings.ContainsFunc(ppn, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return "", fmt.Errorf("phys_port_name %q: %w", ppn, errNoPort)
		}
		return "n" + ppn, nil
	}
	v, ok := n.s.read(n.dev, "dev_port")
	if !ok {
		return "", fmt.Errorf("dev_port: %w", errNoPort)
	}
	port, err := parseUnsigned(v)
	if err != nil {
		return "", fmt.Errorf("dev_port %q: %w", v, errNoPort)
	}
	if port > 0 {
		return "d" + strconv.FormatUint(uint64(port), 10), nil
	}
	return "", nil
}

// representorVF parses "pf%uvf%d" as sscanf does (a prefix match).
func representorVF(s string) (int, bool) {
	rest, ok := strings.CutPrefix(s, "pf")
	if !ok {
		return 0, false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, false
	}
	rest, ok = strings.CutPrefix(rest[i:], "vf")
	if !ok {
		return 0, false
	}
	j := 0
	if j < len(rest) && (rest[j] == '-' || rest[j] == '+') {
		j++
	}
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	v, err := strconv.Atoi(rest[:j])
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// pciOnboard is eno<index>: the firmware's ACPI _DSM index, else SMBIOS
// type 41's.
func (n *netID) pciOnboard(pcidev, suffix string) {
	v, ok := n.s.read(pcidev, "acpi_index")
	if !ok {
		v, ok = n.s.read(pcidev, "index")
	}
	if !ok {
		return
	}
	idx, err := parseUnsigned(v)
	if err != nil {
		return
	}
	if idx == 0 && !n.scheme.has(flagZeroACPIIndex) {
		return
	}
	limit := uint32(onboardMax14)
	if n.scheme.has(flag16BitIndex) {
		limit = onboardMax16
	}
	if idx > limit {
		return
	}
	port, err := n.port()
	if err != nil {
		return
	}
	n.id.Onboard = fmt.Sprintf("%so%d%s%s", n.prefix, idx, port, suffix)
}

// multifunction reads the header type's multi-function bit from the
// function's config space; false when it cannot be read.
func (n *netID) multifunction(pcidev string) bool {
	const headerType = 0x0e
	b, ok := n.s.readBytes(pcidev, "config", headerType+1)
	return ok && len(b) > headerType && b[headerType]&0x80 != 0
}

// isBridge: the modalias' subclass is 04 (PCI bridge).
func (n *netID) isBridge(pcidev string) bool {
	v, ok := n.s.read(pcidev, "modalias")
	if !ok || !strings.HasPrefix(v, "pci:") {
		return false
	}
	i := strings.LastIndexByte(v, 's')
	return i >= 0 && strings.HasPrefix(v[i+1:], "c04")
}

// pciAddress parses a PCI function's name, %x:%x:%x.%u.
func pciAddress(name string) (domain, bus, slot, fn uint32, ok bool) {
	parts := strings.Split(name, ":")
	if len(parts) != 3 {
		return 0, 0, 0, 0, false
	}
	sl, f, found := strings.Cut(parts[2], ".")
	if !found {
		return 0, 0, 0, 0, false
	}
	var err [4]error
	domain, err[0] = parseUnsignedBase(parts[0], 16)
	bus, err[1] = parseUnsignedBase(parts[1], 16)
	slot, err[2] = parseUnsignedBase(sl, 16)
	fn, err[3] = parseUnsignedBase(f, 10)
	return domain, bus, slot, fn, errors.Join(err[:]...) == nil
}

// pciSlot sets the path name (p<bus>s<slot>) and, when the firmware or a
// hotplug slot numbers it, the slot name (s<slot>) of pcidev, each with
// the function, the port and suffix (a virtual function's or a USB
// port's).
func (n *netID) pciSlot(pcidev, suffix string) {
	domain, bus, slot, fn, ok := pciAddress(path.Base(pcidev))
	if !ok {
		return
	}
	if n.scheme.has(flagNPARARI) {
		if v, ok := n.s.read(pcidev, "ari_enabled"); ok && parseBool(v) {
			// ARI: slot and function are one 8-bit function number.
			fn += slot * 8
		}
	}
	dom := ""
	if domain > 0 && n.includeDomain(pcidev) {
		dom = fmt.Sprintf("P%d", domain)
	}
	fns := ""
	if fn > 0 || n.multifunction(pcidev) {
		fns = fmt.Sprintf("f%d", fn)
	}
	port, err := n.port()
	if err != nil {
		return
	}
	n.id.Path = fmt.Sprintf("%s%sp%ds%d%s%s%s", n.prefix, dom, bus, slot, fns, port, suffix)

	hot, ok := n.sunSlot(pcidev)
	if !ok {
		var noDomain bool
		hot, noDomain, ok = n.hotplugSlot(pcidev)
		if !ok {
			return
		}
		if noDomain {
			dom = ""
		}
	}
	n.id.Slot = fmt.Sprintf("%s%ss%d%s%s%s", n.prefix, dom, hot, fns, port, suffix)
}

// includeDomain: udev's hwdb drops the PCI domain for Microsoft's MANA
// NICs (20-net-ifname.hwdb's ID_NET_NAME_INCLUDE_DOMAIN=0), whose domain
// Hyper-V makes up at each boot.
func (n *netID) includeDomain(pcidev string) bool {
	vendor, _ := n.s.read(pcidev, "vendor")
	device, _ := n.s.read(pcidev, "device")
	return !(strings.EqualFold(vendor, "0x1414") && strings.EqualFold(device, "0x00ba"))
}

// sunSlot is the ACPI _SUN of the function, else of its parent PCI device
// unless that is a bridge and the function is not multi-function.
func (n *netID) sunSlot(pcidev string) (uint32, bool) {
	if !n.scheme.has(flagFirmwareNodeSun) {
		return 0, false
	}
	if v, ok := n.sun(pcidev); ok {
		return v, true
	}
	parent := n.s.ancestor(pcidev, "pci", "")
	if parent == "" {
		return 0, false
	}
	if n.isBridge(parent) && !n.multifunction(pcidev) {
		return 0, false
	}
	return n.sun(parent)
}

func (n *netID) sun(dev string) (uint32, bool) {
	v, ok := n.s.read(dev, "firmware_node/sun")
	if !ok {
		return 0, false
	}
	x, err := parseUnsignedBase(v, 10)
	if err != nil || x == 0 {
		return 0, false
	}
	return x, true
}

// hotplugSlot finds the slot of /sys/bus/pci/slots whose address is
// pcidev's or a parent PCI device's; noDomain when s390's function_id
// found it (its slot names carry no domain).
func (n *netID) hotplugSlot(pcidev string) (slot uint32, noDomain, ok bool) {
	ents, err := n.s.list("bus/pci/slots")
	if err != nil {
		return 0, false, false
	}
	for d := pcidev; d != ""; d = n.s.ancestor(d, "pci", "") {
		if n.scheme.has(flagSlotFunctionID) {
			if v, ok := n.s.read(d, "function_id"); ok {
				// s390: the slot is named after the function; udev gives
				// up on the slot name when that slot is not there.
				id, err := parseUnsigned64(v)
				if err != nil || id == 0 || id > 0xffffffff || !n.s.exists("bus/pci/slots", fmt.Sprintf("%08x", id)) {
					return 0, false, false
				}
				return uint32(id), true, true
			}
		}
		name := path.Base(d)
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			num, err := parseUnsignedBase(e.Name(), 10)
			if err != nil || num == 0 {
				continue
			}
			addr, ok := n.s.read("bus/pci/slots/"+e.Name(), "address")
			if !ok || !strings.HasPrefix(name, addr) {
				continue
			}
			if n.scheme.has(flagBridgeNoSlot) && n.isBridge(d) {
				// Every function behind the bridge would claim it.
				if !n.scheme.has(flagBridgeMultifunctionSlot) || !n.multifunction(pcidev) {
					return 0, false, false
				}
			}
			return num, false, true
		}
	}
	return 0, false, false
}

// usb names a USB NIC by its port chain, after its host controller's PCI
// path and slot (or alone, for a controller off PCI).
func (n *netID) usb() {
	intf := n.s.ancestor(n.dev, "usb", "usb_interface")
	if intf == "" {
		return
	}
	spec, ok := usbSpecifier(path.Base(intf))
	if !ok {
		return
	}
	if pcidev := n.s.ancestor(intf, "pci", ""); pcidev != "" {
		n.pciSlot(pcidev, spec)
		return
	}
	if n.scheme.has(flagUSBHost) {
		n.id.Path = n.prefix + spec
	}
}

// usbSpecifier turns an interface's name, BUS-PORT[.PORT...]:CONFIG.IF,
// into u<port>[u<port>...][c<config>][i<if>], leaving out configuration 1
// and interface 0.
func usbSpecifier(sysname string) (string, bool) {
	_, rest, ok := strings.Cut(sysname, "-")
	if !ok {
		return "", false
	}
	ports, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return "", false
	}
	config, intf, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	s := "u" + strings.ReplaceAll(ports, ".", "u")
	if config != "1" {
		s += "c" + config
	}
	if intf != "0" {
		s += "i" + intf
	}
	return s, true
}
