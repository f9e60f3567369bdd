package collector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/mdlayher/ethtool"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// dumpAttempts bounds the retries of a netlink dump the kernel interrupted
// because the interface set changed meanwhile.
const dumpAttempts = 5

// liveNetRecord asks netlink (links, addresses) and ethtool over generic
// netlink (link modes, speed) about the named interfaces.
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
	rec := &netRecord{Interfaces: map[string]netFacts{}}
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
	et, err := ethtool.New()
	if err != nil {
		// Kernels before 5.6 have no ethtool netlink family: speeds stay
		// unknown (null), everything else is fine.
		errs = append(errs, fmt.Errorf("ethtool netlink: %w", err))
	} else {
		defer et.Close()
		for name, f := range rec.Interfaces {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			modes, speed, err := linkModes(et, name)
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

// linkModes asks ethtool for the advertised link modes and the current
// speed of one interface. The ethtool package indexes a fixed table with
// the kernel's mode bits, so a kernel newer than the table could make it
// panic; that is turned into an error for this interface only.
func linkModes(et *ethtool.Client, name string) (modes []string, speed *int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ethtool link modes of %s: %v", name, r)
		}
	}()
	lm, err := et.LinkMode(ethtool.Interface{Name: name})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.EOPNOTSUPP) {
			// No ethtool support in the driver: speed unknown, as lshw.
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("ethtool link modes of %s: %w", name, err)
	}
	for _, m := range lm.Ours {
		modes = append(modes, m.Name)
	}
	// SPEED_UNKNOWN is (u32)-1; 0 means no link on some drivers.
	if lm.SpeedMegabits > 0 && lm.SpeedMegabits < 1<<31-1 {
		speed = &lm.SpeedMegabits
	}
	return modes, speed, nil
}

func allZero(b net.HardwareAddr) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
