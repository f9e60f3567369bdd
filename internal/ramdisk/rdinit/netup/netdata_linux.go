package netup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/networkdata"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/vmedia"
)

// bondModule is the kernel module of bond links.
const bondModule = "bonding"

// configDriveLabel is the label of a config drive (vfat or ISO 9660), as
// glean looks for it; FAT labels are often written upper case.
const configDriveLabel = vmedia.ConfigDriveLabel

// networkDataPath is the file inside a config drive.
const networkDataPath = "openstack/latest/network_data.json"

// findConfigDrive returns the block device (/dev/NAME) whose filesystem is
// labelled config-2 and whose ISO 9660 publisher ID is publisher (without
// case; a vfat drive has none, ""), and its type for mount (iso9660 or
// vfat): whole devices, CD-ROMs (virtual media) included, in name order,
// the first one winning. "" when there is none. Partitions are passed
// over: a config drive in a partition is the one Ironic wrote for the
// deployed instance (its network is the tenant's, not the provisioning
// network), which a ramdisk booted for cleaning or servicing of that node
// would otherwise take; the ramdisk's own comes as a whole device (virtual
// media). The publisher is the ir_pub_id Ironic put on the command line of
// the ISO it built: a drive of another (a virtual medium left from an
// earlier boot) is passed over too, as IPA's images do.
func findConfigDrive(sysBlock, devDir, publisher string) (dev, fstype string) {
	ents, err := os.ReadDir(sysBlock)
	if err != nil {
		return "", ""
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "ram") || strings.HasPrefix(name, "zram") {
			continue
		}
		if _, err := os.Stat(filepath.Join(sysBlock, name, "partition")); err == nil {
			continue
		}
		p := filepath.Join(devDir, name)
		vol, err := vmedia.Probe(p)
		if err != nil {
			continue // an empty CD-ROM drive, a device gone
		}
		if vol.FSType != "" && strings.EqualFold(vol.Label, configDriveLabel) && strings.EqualFold(vol.Publisher, publisher) {
			return p, vol.FSType
		}
	}
	return "", ""
}

// readNetworkData mounts the config drive dev read-only at dir, reads its
// network_data.json and unmounts it. A drive without the file gives
// os.ErrNotExist.
func readNetworkData(dev, fstype, dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	defer os.Remove(dir)
	if err := vmedia.MountReadOnly(dev, fstype, dir); err != nil {
		return nil, err
	}
	defer unix.Unmount(dir, 0)
	b, err := os.ReadFile(filepath.Join(dir, networkDataPath))
	if err != nil {
		return nil, fmt.Errorf("config drive %s: %w", dev, err)
	}
	return b, nil
}

// LoadNetworkData finds the config drive of publisher ID publisher and
// parses its network data; nil with no error when there is no such config
// drive or it has no network data (then the init does DHCP as without
// one).
func LoadNetworkData(log *slog.Logger, mountDir, publisher string) (*networkdata.Data, error) {
	t := time.Now()
	dev, fstype := findConfigDrive("/sys/class/block", "/dev", publisher)
	if dev == "" {
		log.Info("no config drive", "label", configDriveLabel, ParamPublisherID, publisher, "seconds", logging.Seconds(time.Since(t)))
		return nil, nil
	}
	b, err := readNetworkData(dev, fstype, mountDir)
	if errors.Is(err, os.ErrNotExist) {
		log.Info("config drive without network data", "device", dev, "file", networkDataPath)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d, err := networkdata.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config drive %s: %w", dev, err)
	}
	for _, w := range d.Warnings {
		log.Warn("network data: not applied", "device", dev, "what", w)
	}
	log.Info(EventNetworkData, "device", dev, "type", fstype, "links", len(d.Links), "networks", len(d.Networks),
		"seconds", logging.Seconds(time.Since(t)))
	return d, nil
}

// applyNetworkData configures the machine's network as d says, the way
// glean does for IPA's images: physical links found by MAC, bonds and
// VLANs made, static addresses and routes set, DHCPv4 and router
// advertisements (SLAAC, DHCPv6) run on the networks that ask for them,
// DNS servers in resolv.conf. Then, as an IPA image does after glean, the
// links beside the document (see besideDocument): the VLANs of
// ipa-enable-vlan-interfaces it did not make, with DHCP, and DHCP on the
// NICs it does not name only when ironic_agent.dhcp selects them; the
// other unnamed NICs are up without an address (no SLAAC either). It
// returns once every static network is configured and, when there is no
// static network, once the first dynamic one (the document's or one
// beside it) has an address; a link or network that cannot be made is
// logged and the rest still applied, and the error lists them all.
func (n *Network) applyNetworkData(ctx context.Context, d *networkdata.Data) error {
	t := time.Now()
	all, err := netlink.LinkList()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	var nics, unnamed []netlink.Link
	for _, l := range all {
		if n.isNIC(l) {
			nics = append(nics, l)
			if !namedNIC(d, l) {
				unnamed = append(unnamed, l)
				// Before the link is up: the kernel would make a
				// SLAAC address on it as it comes up.
				n.enableIPv6(l.Attrs().Name, n.cfg.IPv6 && n.fallbackDHCP(l))
			}
		}
		// Every link up, as without network data: a NIC the document
		// does not name stays up without an address (LLDP, the
		// inventory's carrier).
		if err := netlink.LinkSetUp(l); err != nil {
			n.log.Warn("link up", "link", l.Attrs().Name, "error", err)
		}
	}
	var errs []error
	made := map[string]netlink.Link{}
	// Physical links first, bonds next (they take physical ones), VLANs
	// last (on either): the document may list them in any order.
	for _, kind := range []networkdata.LinkKind{networkdata.Physical, networkdata.Bond, networkdata.VLAN} {
		for _, l := range d.Links {
			if l.Kind != kind {
				continue
			}
			link, err := n.makeLink(l, nics, made)
			if err != nil {
				n.log.Error("network data: link not made", "link", l.ID, "type", l.Type, "error", err)
				errs = append(errs, fmt.Errorf("link %q: %w", l.ID, err))
				continue
			}
			made[l.ID] = link
		}
	}
	// A link with IPv6 networks takes router advertisements only when one
	// of them is SLAAC or DHCPv6: a static-only link must not grow a
	// SLAAC address beside the operator's.
	ra := map[string]bool{}
	for _, nw := range d.Networks {
		if nw.Kind.IPv6() {
			ra[nw.Link] = ra[nw.Link] || !nw.Kind.Static()
		}
	}
	for id, on := range ra {
		if link, ok := made[id]; ok {
			n.enableIPv6(link.Attrs().Name, on)
		}
	}
	var dns []string
	for _, a := range d.DNS {
		dns = append(dns, a.String())
	}
	type result struct{ err error }
	done := make(chan result, len(d.Networks)+1)
	dynamic, static := 0, 0
	for _, nw := range d.Networks {
		for _, a := range nw.DNS {
			dns = append(dns, a.String())
		}
		link, ok := made[nw.Link]
		if !ok {
			errs = append(errs, fmt.Errorf("network %q: its link %q was not made", nw.ID, nw.Link))
			continue
		}
		name := link.Attrs().Name
		switch nw.Kind {
		case networkdata.IPv4Static, networkdata.IPv6Static:
			if err := n.staticNetwork(link, nw); err != nil {
				n.log.Error("network data: network not configured", "network", nw.ID, "link", name, "error", err)
				errs = append(errs, fmt.Errorf("network %q on %s: %w", nw.ID, name, err))
				continue
			}
			static++
		case networkdata.IPv4DHCP, networkdata.IPv6DHCP, networkdata.IPv6SLAAC:
			dynamic++
			n.spawn(func() {
				var err error
				if nw.Kind == networkdata.IPv4DHCP {
					err = n.dhcp(ctx, link)
				} else {
					// The RA's flags say SLAAC or DHCPv6, as without
					// network data: the type names what the operator
					// expects.
					err = n.ipv6(ctx, link)
				}
				if err == nil {
					if err = n.networkRoutes(link, nw); err != nil {
						n.log.Error("network data: routes not added", "network", nw.ID, "link", name, "error", err)
					}
				} else {
					// Said here: once the first network is up,
					// nobody reads the others' results.
					n.log.Error("network data: network not configured", "network", nw.ID, "type", nw.Type, "link", name, "error", err)
				}
				done <- result{err}
			})
		}
	}
	if len(dns) > 0 {
		n.setResolver(resolverSource{Key: "network_data", Servers: dns})
	}
	if links, parents := n.besideDocument(nics, unnamed); len(links)+len(parents) > 0 {
		// One more dynamic network: the first address of any of them.
		dynamic++
		n.spawn(func() {
			done <- result{n.runDHCP(ctx, links, parents, "")}
		})
	}
	n.log.Info(EventNetworkDataApplied, "links", len(made), "static", static, "dynamic", dynamic,
		"errors", len(errs), "seconds", logging.Seconds(time.Since(t)))
	if static > 0 || dynamic == 0 {
		// The dynamic ones go on in the background.
		return errors.Join(errs...)
	}
	for range dynamic {
		r := <-done
		if r.err == nil {
			return errors.Join(errs...)
		}
		errs = append(errs, r.err)
	}
	return errors.Join(errs...)
}

// namedNIC reports whether one of d's physical links is the NIC l (by its
// current or permanent MAC, as makeLink finds it).
func namedNIC(d *networkdata.Data, l netlink.Link) bool {
	a := l.Attrs()
	return slices.ContainsFunc(d.Links, func(dl networkdata.Link) bool {
		return dl.Kind == networkdata.Physical && (slices.Equal(a.HardwareAddr, dl.MAC) || slices.Equal(a.PermHWAddr, dl.MAC))
	})
}

// fallbackDHCP reports whether a NIC the document does not name gets
// DHCP: only when ironic_agent.dhcp is given and selects it. glean, in
// IPA's images, falls back to DHCPv4 on every such NIC unless built with
// --no-dhcp-fallback; the init leaves them alone by default, as a
// DHCP-less site asks (a DHCP server on another network would hand the
// machine addresses and a default route the operator did not plan), and
// ironic_agent.dhcp=all is glean's fallback.
func (n *Network) fallbackDHCP(l netlink.Link) bool {
	return n.cfg.DHCPGiven && n.selected(l.Attrs().HardwareAddr.String())
}

// besideDocument makes what an IPA image adds to glean's network: the
// VLANs of ipa-enable-vlan-interfaces (IPA creates them whatever glean
// made, on the NIC named or with that MAC, or from LLDP, and leaves a
// link of the same name alone, here one the document made; in images with
// DIB's dhcp-all-interfaces each new VLAN gets DHCP), and the NICs of
// unnamed that fallbackDHCP selects. It returns the links to run DHCP on
// and the NICs whose LLDP neighbours name more VLANs (runDHCP's
// arguments); ironic_agent.dhcp selects among the VLANs by their
// parent's MAC as without network data.
func (n *Network) besideDocument(nics, unnamed []netlink.Link) (links, parents []netlink.Link) {
	for _, err := range n.cfg.VLANProblems {
		n.log.Error("VLAN parameter: entry skipped", "error", err)
	}
	for _, l := range n.explicitVLANs(n.cfg.VLANs, nics) {
		if n.selected(l.Attrs().HardwareAddr.String()) {
			links = append(links, l)
		}
	}
	for _, l := range unnamed {
		if n.fallbackDHCP(l) {
			links = append(links, l)
		}
	}
	if len(links) > 0 {
		var names []string
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		n.log.Info("network data: DHCP beside the document", "links", strings.Join(names, ","),
			ParamVLANs, len(n.cfg.VLANs), ParamDHCP, n.cfg.DHCPGiven)
	}
	return links, n.lldpParents(n.cfg.VLANs, nics)
}

// makeLink finds or creates one link of the document and sets it up.
func (n *Network) makeLink(l networkdata.Link, nics []netlink.Link, made map[string]netlink.Link) (netlink.Link, error) {
	var link netlink.Link
	switch l.Kind {
	case networkdata.Physical:
		i := slices.IndexFunc(nics, func(nic netlink.Link) bool {
			a := nic.Attrs()
			return slices.Equal(a.HardwareAddr, l.MAC) || slices.Equal(a.PermHWAddr, l.MAC)
		})
		if i < 0 {
			return nil, fmt.Errorf("no NIC has MAC %s", l.MAC)
		}
		link = nics[i]
		n.log.Info("network data: physical link", "link", l.ID, "nic", link.Attrs().Name, "mac", l.MAC.String())
	case networkdata.Bond:
		b, err := n.makeBond(l, made)
		if err != nil {
			return nil, err
		}
		link = b
	case networkdata.VLAN:
		parent, ok := made[l.VLAN.Link]
		if !ok {
			return nil, fmt.Errorf("its vlan_link %q was not made", l.VLAN.Link)
		}
		v, err := n.addVLAN(parent, l.VLAN.ID, l.MAC)
		if err != nil {
			return nil, err
		}
		if v == nil {
			// Made already (a second document entry of the same VLAN
			// is refused by the parser; this is a link of the kernel's).
			name, _ := vlanLinkName(parent.Attrs().Name, l.VLAN.ID)
			if v, err = netlink.LinkByName(name); err != nil {
				return nil, err
			}
		}
		link = v
	}
	if l.MTU > 0 && link.Attrs().MTU != l.MTU {
		if err := netlink.LinkSetMTU(link, l.MTU); err != nil {
			return nil, fmt.Errorf("MTU %d on %s: %w", l.MTU, link.Attrs().Name, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("set %s up: %w", link.Attrs().Name, err)
	}
	return link, nil
}

// makeBond creates a bond (bond0, bond1, ...: the first free name) with the
// document's mode, MII monitor interval and hash policy, and enslaves its
// physical links.
func (n *Network) makeBond(l networkdata.Link, made map[string]netlink.Link) (netlink.Link, error) {
	n.ensureModule(&n.bondModuleOnce, bondModule, "bonding module")
	name, err := freeBondName()
	if err != nil {
		return nil, err
	}
	b := netlink.NewLinkBond(netlink.LinkAttrs{Name: name, HardwareAddr: l.MAC})
	b.Mode = netlink.StringToBondMode(l.Bond.Mode)
	if l.Bond.MIIMon > 0 {
		b.Miimon = int(l.Bond.MIIMon / time.Millisecond)
	}
	if l.Bond.XmitHashPolicy != "" {
		b.XmitHashPolicy = netlink.StringToBondXmitHashPolicy(l.Bond.XmitHashPolicy)
	}
	if err := netlink.LinkAdd(b); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return nil, fmt.Errorf("create bond %s: the kernel has no bonding (module %s): %w", name, bondModule, err)
		}
		return nil, fmt.Errorf("create bond %s (mode %s): %w", name, l.Bond.Mode, err)
	}
	bond, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("created bond %s, but cannot find it: %w", name, err)
	}
	var slaves []string
	for _, id := range l.Bond.Links {
		s, ok := made[id]
		if !ok {
			return nil, fmt.Errorf("bond %s: its link %q was not made", name, id)
		}
		// The kernel enslaves a link only while it is down, and brings
		// it up itself.
		if err := netlink.LinkSetDown(s); err != nil {
			return nil, fmt.Errorf("bond %s: set %s down to enslave it: %w", name, s.Attrs().Name, err)
		}
		if err := netlink.LinkSetMasterByIndex(s, bond.Attrs().Index); err != nil {
			return nil, fmt.Errorf("bond %s: enslave %s: %w", name, s.Attrs().Name, err)
		}
		slaves = append(slaves, s.Attrs().Name)
	}
	n.log.Info("bond created", "link", name, "id", l.ID, "mode", l.Bond.Mode, "miimon_ms", b.Miimon,
		"xmit_hash_policy", l.Bond.XmitHashPolicy, "slaves", strings.Join(slaves, ","))
	return bond, nil
}

// freeBondName is the first bondN no link has. Loading the bonding module
// makes a bond0 of its own (max_bonds=1): an empty one is taken over by
// deleting it, so the document's first bond is bond0 as in glean's images.
func freeBondName() (string, error) {
	for i := range 100 {
		name := "bond" + strconv.Itoa(i)
		l, err := netlink.LinkByName(name)
		if err != nil {
			return name, nil
		}
		if _, ok := l.(*netlink.Bond); ok && !hasSlaves(l) {
			if err := netlink.LinkDel(l); err == nil {
				return name, nil
			}
		}
	}
	return "", errors.New("no free bond name from bond0 to bond99")
}

func hasSlaves(l netlink.Link) bool {
	links, err := netlink.LinkList()
	if err != nil {
		return true
	}
	return slices.ContainsFunc(links, func(s netlink.Link) bool { return s.Attrs().MasterIndex == l.Attrs().Index })
}

// staticNetwork sets a static network's address, gateway and routes on
// link.
func (n *Network) staticNetwork(link netlink.Link, nw networkdata.Network) error {
	name := link.Attrs().Name
	addr := &netlink.Addr{IPNet: prefixNet(nw.Address)}
	if nw.Kind == networkdata.IPv6Static {
		// No duplicate address detection: the operator gave this
		// address, and DAD's second of a tentative address would fail
		// the agent's first connections from it.
		addr.Flags = unix.IFA_F_NODAD
	}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("add address %s: %w", nw.Address, err)
	}
	n.log.Info(EventStaticAddress, "network", nw.ID, "link", name, "address", nw.Address.String())
	return n.networkRoutes(link, nw)
}

// networkRoutes adds a network's gateway (as the default route) and
// routes on link: a static network's at once, a dynamic one's once it has
// its address (the kernel refuses a gateway it cannot reach yet).
func (n *Network) networkRoutes(link netlink.Link, nw networkdata.Network) error {
	name := link.Attrs().Name
	routes := nw.Routes
	if nw.Gateway.IsValid() {
		def := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if nw.Gateway.Is6() {
			def = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		routes = append([]networkdata.Route{{Destination: def, Gateway: nw.Gateway}}, routes...)
	}
	for _, r := range routes {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixNet(r.Destination), Gw: net.IP(r.Gateway.AsSlice())}
		if r.Destination.Bits() == 0 {
			route.Dst = nil // the default route
			if r.Destination.Addr().Is6() {
				route.Family = netlink.FAMILY_V6
			}
		}
		if err := netlink.RouteReplace(route); err != nil {
			return fmt.Errorf("route to %s via %s: %w", r.Destination, r.Gateway, err)
		}
	}
	if len(routes) > 0 {
		n.log.Info(EventRoutes, "network", nw.ID, "link", name, "gateway", gatewayString(nw.Gateway), "routes", len(routes))
	}
	if !nw.Kind.IPv6() && nw.Gateway.IsValid() || slices.ContainsFunc(nw.Routes, func(r networkdata.Route) bool {
		return r.Destination.Bits() == 0 && r.Destination.Addr().Is4()
	}) {
		// A later DHCPv4 lease adds no second default route.
		n.mu.Lock()
		n.haveRoute = true
		n.mu.Unlock()
	}
	return nil
}

func gatewayString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

func prefixNet(p netip.Prefix) *net.IPNet {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}
