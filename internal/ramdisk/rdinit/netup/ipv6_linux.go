package netup

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/nclient6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/clock"
	"github.com/ironic-go/ironic-agent/internal/logging"
)

// enableIPv6 sets the link's IPv6 sysctls so the kernel accepts router
// advertisements and makes SLAAC addresses on it: the kernel's defaults do
// (accept_ra=1, autoconf=1 while not forwarding), but a distribution kernel
// may be built or booted (ipv6.disable_ipv6=1) otherwise. It writes below
// cfg.IPv6Conf only, which is the ramdisk's /proc/sys/net/ipv6/conf and
// empty in tests: a network namespace does not isolate /proc/sys for a
// process that entered it by setns, so a test must never write there.
// With ra false (a link whose IPv6 is static only), the link takes no
// router advertisements and makes no SLAAC address.
func (n *Network) enableIPv6(name string, ra bool) {
	if n.cfg.IPv6Conf == "" {
		return
	}
	on := "0"
	if ra {
		on = "1"
	}
	for _, s := range []struct{ key, val string }{{"disable_ipv6", "0"}, {"accept_ra", on}, {"autoconf", on}} {
		p := filepath.Join(n.cfg.IPv6Conf, name, s.key)
		if err := os.WriteFile(p, []byte(s.val), 0o644); err != nil {
			n.log.Warn("IPv6 sysctl", "link", name, "file", p, "error", err)
		}
	}
}

// ipv6 configures l from router advertisements: it waits for an RA
// (soliciting one), then, as its flags say, waits for the kernel's SLAAC
// address, takes a stateful DHCPv6 lease (M) or asks DHCPv6 for DNS only
// (O), and writes the DNS servers of the RA (RDNSS) and of DHCPv6 to
// resolv.conf. It returns once l has a global address the agent can use,
// or when none came within cfg.DHCPTimeout. The lease is renewed and later
// RAs update the DNS servers in the background.
func (n *Network) ipv6(ctx context.Context, l netlink.Link) error {
	name := l.Attrs().Name
	mac := l.Attrs().HardwareAddr
	wctx, cancel := context.WithTimeout(ctx, n.cfg.DHCPTimeout)
	defer cancel()
	t := time.Now()
	conn, err := listenRA(wctx, name)
	if err != nil {
		return fmt.Errorf("ipv6 on %s: %w", name, err)
	}
	ra, err := n.firstRA(wctx, conn, name)
	if err != nil {
		conn.Close()
		n.log.Info("no IPv6 router advertisement", "link", name, "seconds", logging.Seconds(time.Since(t)), "error", err)
		return fmt.Errorf("ipv6 on %s: %w", name, err)
	}
	n.log.Info(EventIPv6RouterAdvertisement, "link", name, "managed", ra.Managed, "other", ra.Other, "slaac", ra.slaac(),
		"router_lifetime", ra.RouterLifetime.Seconds(), "dns", fmt.Sprint(ra.DNS), "seconds", logging.Seconds(time.Since(t)))
	n.setResolver(raResolver(name, ra))
	n.spawn(func() { n.watchRA(ctx, conn, name) })

	if ra.Managed || ra.Other {
		// DHCPv6 speaks from the link-local address, usable once its
		// duplicate address detection is over.
		if _, err := waitAddr(wctx, l, linkLocal); err != nil {
			return fmt.Errorf("ipv6 on %s: no link-local address for DHCPv6: %w", name, err)
		}
		c, err := nclient6.New(name, nclient6.WithTimeout(time.Second), nclient6.WithRetry(-1))
		if err != nil {
			return fmt.Errorf("dhcpv6 on %s: %w", name, err)
		}
		if ra.Managed {
			if err := n.dhcpv6(ctx, wctx, c, l); err != nil {
				c.Close()
				if !ra.slaac() {
					return err
				}
				n.log.Warn("DHCPv6", "link", name, "error", err)
			}
		} else {
			err := n.dhcpv6Info(wctx, c, name, mac)
			c.Close()
			if err != nil {
				n.log.Warn("DHCPv6 information request", "link", name, "error", err)
			}
		}
	}
	if !ra.Managed && !ra.slaac() {
		return fmt.Errorf("ipv6 on %s: the router advertisement offers neither SLAAC nor DHCPv6 addresses", name)
	}
	a, err := waitAddr(wctx, l, global)
	if err != nil {
		return fmt.Errorf("ipv6 on %s: no global address: %w", name, err)
	}
	n.log.Info(EventIPv6Address, "link", name, "address", a.IPNet, "seconds", logging.Seconds(time.Since(t)), "uptime", logging.Uptime())
	return nil
}

// listenRA opens a raw ICMPv6 socket on the link that receives router
// advertisements only and sends with hop limit 255, which RFC 4861 makes
// routers check.
func listenRA(ctx context.Context, name string) (*net.IPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			var f unix.ICMPv6Filter
			for i := range f.Data {
				f.Data[i] = 0xffffffff // block all...
			}
			f.Data[icmpv6RouterAdvert>>5] &^= 1 << (icmpv6RouterAdvert & 31) // ...but RAs
			serr = errors.Join(
				unix.BindToDevice(int(fd), name),
				unix.SetsockoptICMPv6Filter(int(fd), unix.SOL_ICMPV6, unix.ICMPV6_FILTER, &f),
				unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, 255),
				unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1))
		})
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(ctx, "ip6:ipv6-icmp", "::")
	if err != nil {
		return nil, fmt.Errorf("ICMPv6 socket: %w", err)
	}
	return pc.(*net.IPConn), nil
}

// readRA returns the next valid router advertisement on conn: from a
// link-local source with hop limit 255 (RFC 4861 6.1.2: anything else was
// forwarded, so did not come from a router on this link).
func readRA(conn *net.IPConn) (routerAdvert, net.IP, error) {
	buf := make([]byte, 1500)
	oob := make([]byte, 128)
	for {
		nb, noob, _, from, err := conn.ReadMsgIP(buf, oob)
		if err != nil {
			return routerAdvert{}, nil, err
		}
		if from == nil || !from.IP.IsLinkLocalUnicast() || hopLimit(oob[:noob]) != 255 {
			continue
		}
		ra, err := parseRA(buf[:nb])
		if err != nil {
			continue
		}
		return ra, from.IP, nil
	}
}

// hopLimit finds IPV6_HOPLIMIT in a message's control data (-1: absent).
func hopLimit(oob []byte) int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return -1
	}
	for _, m := range msgs {
		if m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_HOPLIMIT && len(m.Data) >= 4 {
			return int(int32(binary.NativeEndian.Uint32(m.Data)))
		}
	}
	return -1
}

// firstRA solicits router advertisements every 4 s (RFC 4861's
// RTR_SOLICITATION_INTERVAL; the kernel's own solicitations at link up
// may have gone before the socket was open) until one comes.
func (n *Network) firstRA(ctx context.Context, conn *net.IPConn, name string) (routerAdvert, error) {
	type got struct {
		ra  routerAdvert
		err error
	}
	ch := make(chan got, 1)
	n.spawn(func() {
		ra, _, err := readRA(conn)
		ch <- got{ra, err}
	})
	dst := &net.IPAddr{IP: net.ParseIP("ff02::2"), Zone: name}
	for {
		if _, err := conn.WriteTo(routerSolicitation(), dst); err != nil {
			n.log.Info("router solicitation", "link", name, "error", err)
		}
		select {
		case g := <-ch:
			return g.ra, g.err
		case <-ctx.Done():
			// Unblocks the reader; the caller closes conn.
			_ = conn.SetReadDeadline(time.Now())
			<-ch
			return routerAdvert{}, ctx.Err()
		case <-time.After(4 * time.Second):
		}
	}
}

// watchRA follows the link's later router advertisements for their DNS
// options, for the rest of the machine's life.
func (n *Network) watchRA(ctx context.Context, conn *net.IPConn, name string) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Now()) })
	defer stop()
	for {
		ra, _, err := readRA(conn)
		if err != nil {
			return
		}
		n.setResolver(raResolver(name, ra))
	}
}

// dhcpv6 takes a stateful lease (IA_NA) on l, adds its address, and keeps
// renewing it in the background for as long as ctx lives. wctx bounds the
// first exchange.
func (n *Network) dhcpv6(ctx, wctx context.Context, c *nclient6.Client, l netlink.Link) error {
	name := l.Attrs().Name
	mac := l.Attrs().HardwareAddr
	t := time.Now()
	mods := []dhcpv6.Modifier{dhcpv6.WithClientID(dhcpv6ClientID(mac)), dhcpv6.WithIAID(dhcpv6IAID(mac))}
	adv, err := c.Solicit(wctx, mods...)
	if err != nil {
		return fmt.Errorf("dhcpv6 on %s: solicit: %w", name, err)
	}
	reply, err := c.Request(wctx, adv)
	if err != nil {
		return fmt.Errorf("dhcpv6 on %s: request: %w", name, err)
	}
	lease, err := n.applyV6(l, reply)
	if err != nil {
		return fmt.Errorf("dhcpv6 on %s: %w", name, err)
	}
	n.log.Info(EventDHCPv6Lease, "link", name, "address", lease.addr.IPv6Addr, "server", reply.Options.ServerID(),
		"dns", fmt.Sprint(reply.Options.DNS()), "seconds", logging.Seconds(time.Since(t)), "uptime", logging.Uptime())
	n.spawn(func() { n.renewV6(ctx, c, l, lease) })
	return nil
}

// v6Lease is what a DHCPv6 reply gave: the IA_NA with its one address and
// the server that gave it.
type v6Lease struct {
	server dhcpv6.DUID
	ia     *dhcpv6.OptIANA
	addr   *dhcpv6.OptIAAddress
	at     time.Time
}

// t1t2 are when to renew and to rebind: the server's, or RFC 8415's
// recommendation (0.5 and 0.8 of the preferred lifetime) when it leaves
// them to the client.
func (le v6Lease) t1t2() (time.Duration, time.Duration) {
	t1, t2 := le.ia.T1, le.ia.T2
	if t1 <= 0 || t2 < t1 {
		p := le.addr.PreferredLifetime
		t1, t2 = p/2, p*4/5
	}
	return max(t1, 10*time.Second), max(t2, 10*time.Second)
}

// applyV6 checks a Reply and adds its IA_NA address as a /128, which is
// what DHCPv6 gives; the on-link prefix and the default route come from
// the RA (the kernel adds both).
func (n *Network) applyV6(l netlink.Link, reply *dhcpv6.Message) (v6Lease, error) {
	if st := reply.Options.Status(); st != nil && st.StatusCode != iana.StatusSuccess {
		return v6Lease{}, fmt.Errorf("server says %s: %s", st.StatusCode, st.StatusMessage)
	}
	ia := reply.Options.OneIANA()
	if ia == nil {
		return v6Lease{}, errors.New("reply has no IA_NA")
	}
	if st := ia.Options.Status(); st != nil && st.StatusCode != iana.StatusSuccess {
		return v6Lease{}, fmt.Errorf("IA_NA: server says %s: %s", st.StatusCode, st.StatusMessage)
	}
	a := ia.Options.OneAddress()
	if a == nil || a.IPv6Addr.To16() == nil || a.IPv6Addr.To4() != nil {
		return v6Lease{}, errors.New("IA_NA has no IPv6 address")
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: a.IPv6Addr, Mask: net.CIDRMask(128, 128)},
		ValidLft: lifetimeSecs(a.ValidLifetime), PreferedLft: lifetimeSecs(a.PreferredLifetime)}
	if err := netlink.AddrReplace(l, addr); err != nil {
		return v6Lease{}, fmt.Errorf("add address %s: %w", addr.IPNet, err)
	}
	n.setResolver(v6Resolver(l.Attrs().Name, reply))
	return v6Lease{server: reply.Options.ServerID(), ia: ia, addr: a, at: time.Now()}, nil
}

func v6Resolver(name string, reply *dhcpv6.Message) resolverSource {
	s := resolverSource{Key: "dhcp6 " + name}
	for _, ip := range reply.Options.DNS() {
		s.Servers = append(s.Servers, ip.String())
	}
	if l := reply.Options.DomainSearchList(); l != nil {
		s.Search = l.Labels
	}
	return s
}

// lifetimeSecs is a lifetime as netlink takes it (0: forever, so an
// infinite DHCPv6 lifetime and the kernel's agree).
func lifetimeSecs(d time.Duration) int {
	if d <= 0 || d >= time.Duration(0xffffffff)*time.Second {
		return 0
	}
	return int(d / time.Second)
}

// renewV6 renews the lease at T1 with its server (Renew) and, from T2,
// with any server (Rebind), retrying every 30 s until the address's valid
// lifetime ends, when the kernel removes it; then it starts over with a
// Solicit.
func (n *Network) renewV6(ctx context.Context, c *nclient6.Client, l netlink.Link, lease v6Lease) {
	defer c.Close()
	name := l.Attrs().Name
	mac := l.Attrs().HardwareAddr
	for {
		t1, t2 := lease.t1t2()
		next := time.Until(lease.at.Add(t1))
		for {
			if clock.Sleep(ctx, max(next, 0)) != nil {
				return
			}
			typ, server := dhcpv6.MessageTypeRenew, lease.server
			if time.Since(lease.at) >= t2 {
				typ, server = dhcpv6.MessageTypeRebind, nil
			}
			if lease.addr.ValidLifetime > 0 && time.Since(lease.at) >= lease.addr.ValidLifetime {
				typ = dhcpv6.MessageTypeSolicit
			}
			nl, err := n.extendV6(ctx, c, l, typ, server, lease)
			if err == nil {
				lease = nl
				n.log.Info("DHCPv6 renewed", "link", name, "how", typ, "address", lease.addr.IPv6Addr,
					"valid_seconds", lease.addr.ValidLifetime.Seconds())
				break
			}
			n.log.Warn("DHCPv6 renew", "link", name, "how", typ, "error", err, "mac", mac)
			next = 30 * time.Second
		}
	}
}

// extendV6 runs one Renew, Rebind or (the lease lost) Solicit and Request
// exchange, bounded to 30 s.
func (n *Network) extendV6(ctx context.Context, c *nclient6.Client, l netlink.Link, typ dhcpv6.MessageType, server dhcpv6.DUID, lease v6Lease) (v6Lease, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	mac := l.Attrs().HardwareAddr
	var reply *dhcpv6.Message
	if typ == dhcpv6.MessageTypeSolicit {
		adv, err := c.Solicit(rctx, dhcpv6.WithClientID(dhcpv6ClientID(mac)), dhcpv6.WithIAID(dhcpv6IAID(mac)))
		if err != nil {
			return lease, err
		}
		if reply, err = c.Request(rctx, adv); err != nil {
			return lease, err
		}
	} else {
		m, err := dhcpv6.NewMessage()
		if err != nil {
			return lease, err
		}
		m.MessageType = typ
		m.AddOption(dhcpv6.OptClientID(dhcpv6ClientID(mac)))
		if server != nil {
			m.AddOption(dhcpv6.OptServerID(server))
		}
		m.AddOption(dhcpv6.OptElapsedTime(0))
		m.AddOption(&dhcpv6.OptIANA{IaId: lease.ia.IaId, Options: dhcpv6.IdentityOptions{Options: dhcpv6.Options{lease.addr}}})
		m.AddOption(dhcpv6.OptRequestedOption(dhcpv6.OptionDNSRecursiveNameServer, dhcpv6.OptionDomainSearchList))
		reply, err = c.SendAndRead(rctx, nclient6.AllDHCPRelayAgentsAndServers, m, nclient6.IsMessageType(dhcpv6.MessageTypeReply))
		if err != nil {
			return lease, err
		}
	}
	return n.applyV6(l, reply)
}

// dhcpv6Info asks for DNS only (Information-request), as the RA's O flag
// without M says.
func (n *Network) dhcpv6Info(ctx context.Context, c *nclient6.Client, name string, mac net.HardwareAddr) error {
	m, err := dhcpv6.NewMessage()
	if err != nil {
		return err
	}
	m.MessageType = dhcpv6.MessageTypeInformationRequest
	m.AddOption(dhcpv6.OptClientID(dhcpv6ClientID(mac)))
	m.AddOption(dhcpv6.OptElapsedTime(0))
	m.AddOption(dhcpv6.OptRequestedOption(dhcpv6.OptionDNSRecursiveNameServer, dhcpv6.OptionDomainSearchList))
	reply, err := c.SendAndRead(ctx, nclient6.AllDHCPRelayAgentsAndServers, m, nclient6.IsMessageType(dhcpv6.MessageTypeReply))
	if err != nil {
		return err
	}
	n.setResolver(v6Resolver(name, reply))
	n.log.Info("DHCPv6 information", "link", name, "dns", fmt.Sprint(reply.Options.DNS()))
	return nil
}

// Address kinds waitAddr looks for.
const (
	linkLocal = iota
	global
)

// waitAddr polls l's IPv6 addresses until one of the kind is usable (its
// duplicate address detection over and passed).
func waitAddr(ctx context.Context, l netlink.Link, kind int) (netlink.Addr, error) {
	for {
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V6)
		if errors.Is(err, netlink.ErrDumpInterrupted) {
			// The kernel changed the addresses during the dump, which
			// is what this waits for (a SLAAC address added while the
			// link-local one is looked for): look again.
			addrs, err = nil, nil
		}
		if err != nil {
			return netlink.Addr{}, fmt.Errorf("list addresses: %w", err)
		}
		i := slices.IndexFunc(addrs, func(a netlink.Addr) bool {
			if a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) != 0 {
				return false
			}
			if kind == linkLocal {
				return a.IP.IsLinkLocalUnicast()
			}
			return a.IP.IsGlobalUnicast()
		})
		if i >= 0 {
			return addrs[i], nil
		}
		if clock.Sleep(ctx, 50*time.Millisecond) != nil {
			return netlink.Addr{}, ctx.Err()
		}
	}
}
