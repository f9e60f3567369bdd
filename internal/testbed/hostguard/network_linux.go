package hostguard

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// snapNetwork records the links, addresses and routes (every table, IPv4
// and IPv6) of the namespace Options.NetNS names, or of the caller's.
func snapNetwork(s *Snapshot, o Options) error {
	h, err := netlinkHandle(o.NetNS)
	if err != nil {
		return err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return fmt.Errorf("listing links: %w", err)
	}
	names := map[int]string{}
	for _, l := range links {
		a := l.Attrs()
		names[a.Index] = a.Name
		s.Items["link "+a.Name] = l.Type()
	}
	name := func(index int) string {
		if n, ok := names[index]; ok {
			return n
		}
		return "#" + strconv.Itoa(index)
	}
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("listing addresses: %w", err)
	}
	for _, a := range addrs {
		// IPv6 privacy addresses are replaced on the kernel's own schedule
		// (temp_prefered_lft), whatever the tests do. (For IPv4 the same
		// bit means "secondary", which is kept.)
		if a.IP.To4() == nil && a.Flags&unix.IFA_F_TEMPORARY != 0 {
			continue
		}
		s.Items[fmt.Sprintf("addr %s %s", name(a.LinkIndex), a.IPNet)] = ""
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("listing routes: %w", err)
	}
	for _, r := range routes {
		s.Items["route "+routeKey(r, name)] = ""
	}
	return nil
}

func netlinkHandle(path string) (*netlink.Handle, error) {
	if path == "" {
		h, err := netlink.NewHandle()
		if err != nil {
			return nil, fmt.Errorf("netlink: %w", err)
		}
		return h, nil
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", path, err)
	}
	return h, nil
}

// routeKey names a route by what makes it one: table, type, destination,
// gateways, device, source and metric.
func routeKey(r netlink.Route, name func(int) string) string {
	var b strings.Builder
	switch r.Table {
	case unix.RT_TABLE_MAIN:
		b.WriteString("main")
	case unix.RT_TABLE_LOCAL:
		b.WriteString("local")
	case unix.RT_TABLE_DEFAULT:
		b.WriteString("default")
	default:
		b.WriteString("table" + strconv.Itoa(r.Table))
	}
	family := "inet"
	if r.Family == unix.AF_INET6 {
		family = "inet6"
	}
	fmt.Fprintf(&b, " %s %s", family, routeType(r.Type))
	if r.Dst != nil {
		b.WriteString(" " + r.Dst.String())
	} else {
		b.WriteString(" default")
	}
	if r.Gw != nil {
		b.WriteString(" via " + r.Gw.String())
	}
	for _, nh := range r.MultiPath {
		fmt.Fprintf(&b, " nexthop via %s dev %s", nh.Gw, name(nh.LinkIndex))
	}
	if r.LinkIndex != 0 {
		b.WriteString(" dev " + name(r.LinkIndex))
	}
	if r.Src != nil {
		b.WriteString(" src " + r.Src.String())
	}
	fmt.Fprintf(&b, " metric %d", r.Priority)
	return b.String()
}

func routeType(t int) string {
	switch t {
	case unix.RTN_UNICAST:
		return "unicast"
	case unix.RTN_LOCAL:
		return "local"
	case unix.RTN_BROADCAST:
		return "broadcast"
	case unix.RTN_MULTICAST:
		return "multicast"
	case unix.RTN_BLACKHOLE:
		return "blackhole"
	case unix.RTN_UNREACHABLE:
		return "unreachable"
	case unix.RTN_PROHIBIT:
		return "prohibit"
	}
	return "type" + strconv.Itoa(t)
}
