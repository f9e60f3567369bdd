package collector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/ironic-go/ironic-agent/inventory"
)

// isVLANName is IPA's netutils.is_vlan: everything after the first "." is
// digits ("bond0.100"; not "a.b.100").
func isVLANName(name string) bool {
	_, vid, ok := strings.Cut(name, ".")
	if !ok || vid == "" {
		return false
	}
	for _, r := range vid {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// InfiniBand constants from IPA's Mellanox hardware manager: an IPoIB
// hardware address is 20 octets (59 characters), the last 8 are the port
// GUID.
const (
	mellanoxVendor         = "0x15b3"
	infinibandAddrLen      = 59
	infinibandClientPrefix = "ff:00:00:00:00:00:02:00:00:02:c9:00:"
)

// collectInterfaces fills interfaces[] with IPA's candidates (IPA
// netutils.list_interfaces): entries of /sys/class/net that are a VLAN by
// name, have a device link (a physical, PCI or virtio NIC) or are a bond.
// lo, bridges, veth, tun/tap, dummy and ifb are skipped. An interface
// without a usable MAC is dropped, as IPA does.
func collectInterfaces(ctx context.Context, c *collection) error {
	names, err := interfaceCandidates(c.fs)
	if err != nil {
		return err
	}
	var errs []error
	rec, err := c.netFactsFor(ctx, names)
	if err != nil {
		// Addresses, permanent MACs or speeds are missing; sysfs still
		// gives names, MACs, carrier and PCI data.
		errs = append(errs, err)
	}
	if rec == nil {
		rec = &netRecord{Interfaces: map[string]netFacts{}}
	}
	if !c.fs.live() {
		names = inRecordedOrder(names, rec.Order)
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		ifc, ok, err := c.interfaceInfo(name, rec.Interfaces[name])
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			ifc.LLDP = c.lldpOf(name)
			c.inv.Interfaces = append(c.inv.Interfaces, ifc)
		}
	}
	return errors.Join(errs...)
}

// InterfaceNames lists IPA's candidate interfaces below opts.Root: the
// NICs the inventory reports and LLDP listens on. On the live root they
// come in the kernel's directory order, the inventory's.
func InterfaceNames(opts Options) ([]string, error) {
	return interfaceCandidates(opts.fs())
}

// interfaceCandidates lists IPA's candidates (IPA's netutils.list_interfaces)
// in the order IPA's os.listdir gives them: the kernel's directory order,
// which for sysfs is a hash of each name and the network namespace (it
// differs between boots). Below any other root the directory is a copy
// whose order is its file system's: there the names are sorted, and
// collectInterfaces puts them in the recorded order.
func interfaceCandidates(fsys rootFS) ([]string, error) {
	entries, err := fsys.ReadDirOrder("sys/class/net")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if isInterfaceCandidate(fsys, e.Name()) {
			names = append(names, e.Name())
		}
	}
	if !fsys.live() {
		slices.Sort(names)
	}
	return names, nil
}

// inRecordedOrder orders names as order (net.json's) lists them; names it
// lacks follow in their own order.
func inRecordedOrder(names, order []string) []string {
	if len(order) == 0 {
		return names
	}
	pos := make(map[string]int, len(order))
	for i, n := range order {
		if _, dup := pos[n]; !dup {
			pos[n] = i
		}
	}
	rank := func(n string) int {
		if i, ok := pos[n]; ok {
			return i
		}
		return len(order)
	}
	out := slices.Clone(names)
	slices.SortStableFunc(out, func(a, b string) int { return rank(a) - rank(b) })
	return out
}

func isInterfaceCandidate(fsys rootFS, name string) bool {
	if isVLANName(name) {
		return true
	}
	base := "sys/class/net/" + name
	if _, err := fsys.Stat(base + "/device"); err == nil {
		return true
	}
	if _, err := fsys.Stat(base + "/bonding"); err == nil {
		return true
	}
	return false
}

// interfaceInfo builds one record; ok is false when IPA would drop the
// interface (no usable MAC).
func (c *collection) interfaceInfo(name string, facts netFacts) (inventory.Interface, bool, error) {
	base := "sys/class/net/" + name
	var errs []error
	optional := func(rel string) *string {
		v, err := c.fs.ReadString(base + "/" + rel)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return nil
		}
		return &v
	}
	linkBase := func(rel string) *string {
		t, err := c.fs.Readlink(base + "/" + rel)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return nil
		}
		return inventory.Ptr(path.Base(t))
	}

	ifc := inventory.Interface{Name: name}
	ifc.Vendor = optional("device/vendor")
	ifc.Product = optional("device/device")

	// IPA master: the permanent (burnt-in) address, else the current one.
	mac := strings.ToLower(facts.PermAddress)
	if mac == "" {
		cur, err := c.fs.ReadString(base + "/address")
		if err != nil {
			errs = append(errs, err)
		}
		mac = strings.ToLower(cur)
	}

	if len(mac) == infinibandAddrLen && ifc.Vendor != nil && *ifc.Vendor == mellanoxVendor {
		// IPA's Mellanox manager: the "InfiniBand MAC" is the GUID's first
		// three and last three octets, the DHCP client id a fixed prefix
		// plus the GUID; it reports no IPv6, speed, PCI address or driver.
		guid := mac[36:]
		ifc.MACAddress = guid[:8] + guid[14:]
		ifc.ClientID = inventory.Ptr(infinibandClientPrefix + guid)
		ifc.IPv4Address = first(facts.IPv4)
		ifc.HasCarrier = c.hasCarrier(name)
		return ifc, true, errors.Join(errs...)
	}

	// IPA drops an interface without an address, and one whose address
	// starts "fa:" (it warns that such a locally assigned address is
	// unexpected, e.g. an in-band BMC NIC). All-zero addresses (a bond
	// without slaves) are reported as they are, as IPA does.
	if mac == "" || strings.HasPrefix(mac, "fa:") {
		return ifc, false, errors.Join(errs...)
	}
	ifc.MACAddress = mac
	ifc.IPv4Address = first(facts.IPv4)
	ifc.IPv6Address = first(facts.IPv6)
	ifc.HasCarrier = c.hasCarrier(name)
	ifc.SpeedMbps = lshwSpeed(facts)
	ifc.PCIAddress = linkBase("device")
	ifc.Driver = linkBase("device/driver")
	return ifc, true, errors.Join(errs...)
}

// hasCarrier is IPA's rule: carrier reads "1". Reading it fails with EINVAL
// while the interface is down; that is false, not a problem to report.
func (c *collection) hasCarrier(name string) bool {
	v, err := c.fs.ReadString("sys/class/net/" + name + "/carrier")
	return err == nil && v == "1"
}

func first(s []string) *string {
	if len(s) == 0 {
		return nil
	}
	return inventory.Ptr(s[0])
}

// lshwSpeed is IPA 13's speed_mbps, lshw's capacity, else its current
// speed (IPA takes "capacity or speed"), else nil. The capacity is the
// fastest supported mode of ETHTOOL_GSET's mask that lshw tests (all of
// them that carry a speed, with Debian's patch): a NIC that supports a
// speed it does not advertise (vmxnet3: 10000baseT/Full, advertising
// none) has that capacity. lshw names only four current speeds; another
// (a bond's sum, 25000) gives no speed.
func lshwSpeed(f netFacts) *int {
	best := 0
	for _, m := range f.LinkModes {
		if !slices.Contains(legacyLinkModes[:], m) {
			// Recorded by an older capture from the netlink bitset:
			// beyond the 32 bits lshw sees.
			continue
		}
		if n := linkModeMbps(m); n > best {
			best = n
		}
	}
	if best > 0 {
		return &best
	}
	if f.SpeedMbps != nil {
		switch s := *f.SpeedMbps; s {
		case 10, 100, 1000, 10000:
			return &s
		}
	}
	return nil
}

// linkModeMbps reads the speed out of an ethtool link mode name such as
// "25000baseCR/Full"; 0 for modes that are not speeds ("Autoneg", "TP").
func linkModeMbps(mode string) int {
	i := strings.Index(mode, "base")
	if i <= 0 {
		return 0
	}
	n, err := strconv.Atoi(mode[:i])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// collectLLDP listens for LLDP on IPA's candidate NICs when asked to
// (IPA's ipa-collect-lldp); collectInterfaces, which runs after it, fills
// interfaces[].lldp from what it heard: [] for an interface that heard
// nothing, the raw TLVs otherwise.
func collectLLDP(ctx context.Context, c *collection) error {
	if !c.opts.CollectLLDP {
		return nil
	}
	if c.opts.LLDP == nil {
		return errors.New("LLDP collection requested but no LLDP capturer is configured")
	}
	names, err := interfaceCandidates(c.fs)
	if err != nil || len(names) == 0 {
		// The interfaces unit reports an unreadable sys/class/net.
		return nil
	}
	got, err := c.opts.LLDP.Capture(ctx, names, c.opts.LLDPTimeout)
	if err != nil {
		return fmt.Errorf("lldp capture: %w", err)
	}
	if got == nil {
		got = map[string][]inventory.LLDPTLV{}
	}
	c.lldp = got
	return nil
}

// lldpOf is what the lldp unit heard on name: nil (null) when it did not
// run, [] when the interface heard nothing.
func (c *collection) lldpOf(name string) []inventory.LLDPTLV {
	if c.lldp == nil {
		return nil
	}
	if tlvs := c.lldp[name]; tlvs != nil {
		return tlvs
	}
	return []inventory.LLDPTLV{}
}
