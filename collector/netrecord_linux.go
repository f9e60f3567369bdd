package collector

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// dumpAttempts bounds the retries of a netlink dump the kernel interrupted
// because the interface set changed meanwhile.
const dumpAttempts = 5

// liveNetRecord asks netlink (links, addresses) and the ethtool ioctl
// (supported link modes, speed) about the named interfaces, names in
// directory order.
func liveNetRecord(ctx context.Context, names []string) (*netRecord, error) {
	// Only rtnetlink: NewHandle() with no family opens every family it
	// knows, XFRM included, and fails with "protocol not supported" on a
	// kernel without xfrm_user loaded (the agent ramdisk).
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()

	var links []netlink.Link
	var addrs []netlink.Addr
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		links, err = h.LinkList()
		if err == nil {
			addrs, err = h.AddrList(nil, netlink.FAMILY_ALL)
		}
		if err == nil || !errors.Is(err, netlink.ErrDumpInterrupted) || attempt == dumpAttempts-1 {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("netlink dump: %w", err)
	}

	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	byIndex := map[int]string{}
	rec := &netRecord{Interfaces: map[string]netFacts{}, Order: names}
	for _, l := range links {
		a := l.Attrs()
		if !want[a.Name] {
			continue
		}
		byIndex[a.Index] = a.Name
		f := netFacts{IPv4: []string{}, IPv6: []string{}}
		if len(a.PermHWAddr) > 0 && !allZero(a.PermHWAddr) {
			f.PermAddress = a.PermHWAddr.String()
		}
		rec.Interfaces[a.Name] = f
	}
	for _, ad := range addrs {
		name, ok := byIndex[ad.LinkIndex]
		if !ok || ad.IPNet == nil {
			continue
		}
		f := rec.Interfaces[name]
		if ip4 := ad.IP.To4(); ip4 != nil {
			f.IPv4 = append(f.IPv4, ip4.String())
		} else {
			s := ad.IP.String()
			if ad.IP.IsLinkLocalUnicast() {
				s += "%" + name
			}
			f.IPv6 = append(f.IPv6, s)
		}
		rec.Interfaces[name] = f
	}

	var errs []error
	gset, closeSocket, err := ethtoolSocket()
	if err != nil {
		// Speeds stay unknown (null), everything else is fine.
		errs = append(errs, err)
	} else {
		defer closeSocket()
		for name, f := range rec.Interfaces {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			modes, speed, err := ethtoolFacts(gset, name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			f.LinkModes, f.SpeedMbps = modes, speed
			rec.Interfaces[name] = f
		}
	}
	return rec, errors.Join(errs...)
}

func allZero(b net.HardwareAddr) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
