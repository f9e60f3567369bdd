package netup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// routerAdvert is what the init uses of an ICMPv6 Router Advertisement
// (RFC 4861 section 4.2, RDNSS and DNSSL from RFC 8106). The kernel acts on
// the same RA itself (SLAAC, default route, on-link prefixes); the init
// reads it for what the kernel leaves to user space: the M and O flags that
// call for DHCPv6, and the DNS options.
type routerAdvert struct {
	Managed        bool // M: addresses from stateful DHCPv6
	Other          bool // O: other configuration (DNS) from DHCPv6
	RouterLifetime time.Duration
	Prefixes       []raPrefix
	DNS            []netip.Addr // RDNSS, in the RA's order
	Search         []string     // DNSSL
}

// raPrefix is one Prefix Information option.
type raPrefix struct {
	Prefix     netip.Prefix
	OnLink     bool // L
	Autonomous bool // A: SLAAC
	Valid      time.Duration
	Preferred  time.Duration
}

// slaac says whether the RA lets the kernel make an address by itself.
func (ra routerAdvert) slaac() bool {
	for _, p := range ra.Prefixes {
		// RFC 4862 5.5.3: SLAAC makes an address from a /64 only
		// (with Ethernet's 64-bit interface identifiers).
		if p.Autonomous && p.Valid > 0 && p.Prefix.Bits() == 64 && !p.Prefix.Addr().IsLinkLocalUnicast() {
			return true
		}
	}
	return false
}

const (
	icmpv6RouterSolicitation = 133
	icmpv6RouterAdvert       = 134
	ndOptPrefixInfo          = 3
	ndOptRDNSS               = 25
	ndOptDNSSL               = 31
	raHeaderLen              = 16
)

// parseRA decodes an ICMPv6 message as a raw ICMPv6 socket delivers it
// (from the ICMPv6 type on; the kernel has checked the checksum). Options
// the init does not use are skipped; a malformed option ends the message
// with an error, as RFC 4861 6.1.2 says to drop such an RA whole.
func parseRA(b []byte) (routerAdvert, error) {
	var ra routerAdvert
	if len(b) < raHeaderLen {
		return ra, fmt.Errorf("router advertisement: %d bytes, want at least %d", len(b), raHeaderLen)
	}
	if b[0] != icmpv6RouterAdvert || b[1] != 0 {
		return ra, fmt.Errorf("not a router advertisement: ICMPv6 type %d code %d", b[0], b[1])
	}
	ra.Managed = b[5]&0x80 != 0
	ra.Other = b[5]&0x40 != 0
	ra.RouterLifetime = time.Duration(binary.BigEndian.Uint16(b[6:8])) * time.Second
	for opts := b[raHeaderLen:]; len(opts) > 0; {
		if len(opts) < 2 || opts[1] == 0 || int(opts[1])*8 > len(opts) {
			return routerAdvert{}, fmt.Errorf("router advertisement: option at byte %d: bad length", len(b)-len(opts))
		}
		o := opts[:int(opts[1])*8]
		opts = opts[len(o):]
		switch o[0] {
		case ndOptPrefixInfo:
			if len(o) != 32 || o[2] > 128 {
				return routerAdvert{}, fmt.Errorf("router advertisement: prefix information: %d bytes, prefix length %d", len(o), o[2])
			}
			addr := netip.AddrFrom16([16]byte(o[16:32]))
			ra.Prefixes = append(ra.Prefixes, raPrefix{
				Prefix:     netip.PrefixFrom(addr, int(o[2])).Masked(),
				OnLink:     o[3]&0x80 != 0,
				Autonomous: o[3]&0x40 != 0,
				Valid:      ndLifetime(o[4:8]),
				Preferred:  ndLifetime(o[8:12]),
			})
		case ndOptRDNSS:
			if len(o) < 24 {
				return routerAdvert{}, fmt.Errorf("router advertisement: RDNSS: %d bytes, want at least 24", len(o))
			}
			if ndLifetime(o[4:8]) == 0 {
				continue // RFC 8106 5.1: lifetime 0 withdraws the servers
			}
			for a := o[8:]; len(a) >= 16; a = a[16:] {
				ra.DNS = append(ra.DNS, netip.AddrFrom16([16]byte(a[:16])))
			}
		case ndOptDNSSL:
			if len(o) < 16 {
				return routerAdvert{}, fmt.Errorf("router advertisement: DNSSL: %d bytes, want at least 16", len(o))
			}
			if ndLifetime(o[4:8]) == 0 {
				continue
			}
			names, err := dnsNames(o[8:])
			if err != nil {
				return routerAdvert{}, fmt.Errorf("router advertisement: DNSSL: %w", err)
			}
			ra.Search = append(ra.Search, names...)
		}
	}
	return ra, nil
}

// ndLifetime is a lifetime field of a neighbour discovery option, in
// seconds, 0xffffffff meaning infinity.
func ndLifetime(b []byte) time.Duration {
	s := binary.BigEndian.Uint32(b)
	if s == 0xffffffff {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(s) * time.Second
}

// dnsNames decodes DNSSL's domain names: uncompressed DNS wire labels, one
// name after the other, the rest of the option zero padding.
func dnsNames(b []byte) ([]string, error) {
	var names []string
	var labels []string
	for len(b) > 0 {
		n := int(b[0])
		if n == 0 {
			if len(labels) == 0 {
				break // padding
			}
			names = append(names, strings.Join(labels, "."))
			labels = nil
			b = b[1:]
			continue
		}
		if n > 63 || 1+n > len(b) {
			return nil, errors.New("label runs past the option")
		}
		labels = append(labels, string(b[1:1+n]))
		b = b[1+n:]
	}
	if len(labels) > 0 {
		return nil, errors.New("last name has no terminating zero label")
	}
	return names, nil
}

// routerSolicitation is an RS with no options: the kernel's source
// address may be the unspecified one while the link-local is tentative,
// and RFC 4861 4.1 forbids the source link-layer option then.
func routerSolicitation() []byte { return []byte{icmpv6RouterSolicitation, 0, 0, 0, 0, 0, 0, 0} }

// dhcpv6ClientID is the DHCPv6 client identifier the init uses on a NIC:
// DUID-LL (type 3) of the NIC's MAC. An operator knows it before the
// machine boots (00:03:00:01 followed by the MAC), so a reservation keyed
// on the DUID ("dhcp-host=id:00:03:00:01:<mac>,..." in dnsmasq) works, and
// it stays the same on every boot, unlike DUID-LLT's time. dnsmasq, which
// Ironic's and Metal3's provisioning networks run, also matches
// "dhcp-host=<mac>,..." for a DHCPv6 client by the MAC it takes out of a
// DUID-LL or DUID-LLT (or from its neighbour table on the same link), so
// the MAC reservations made for DHCPv4 keep working.
func dhcpv6ClientID(mac net.HardwareAddr) dhcpv6.DUID {
	return &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: mac}
}

// dhcpv6IAID is the identity association's IAID: the MAC's last four
// bytes, what ISC dhclient and the DHCP library's own Solicit use, so the
// one IA_NA of a NIC is predictable too.
func dhcpv6IAID(mac net.HardwareAddr) [4]byte {
	var id [4]byte
	if len(mac) >= 4 {
		copy(id[:], mac[len(mac)-4:])
	}
	return id
}

// resolvConf is the resolv.conf text for the name servers and search
// domains gathered from every source, in the order given (DHCPv4 first,
// then DHCPv6, then router advertisements), each server and domain once.
// glibc reads at most three name servers and six search domains; the rest
// are written anyway, for musl and for a person reading the file.
func resolvConf(sources []resolverSource) string {
	var b strings.Builder
	b.WriteString("# written by ironic-agent init from the DHCP lease\n")
	var search, servers []string
	seen := map[string]bool{}
	for _, s := range sources {
		for _, d := range s.Search {
			if d != "" && !seen["s "+d] {
				seen["s "+d] = true
				search = append(search, d)
			}
		}
		for _, ip := range s.Servers {
			if !seen["n "+ip] {
				seen["n "+ip] = true
				servers = append(servers, ip)
			}
		}
	}
	if len(search) > 0 {
		b.WriteString("search " + strings.Join(search, " ") + "\n")
	}
	for _, ip := range servers {
		b.WriteString("nameserver " + ip + "\n")
	}
	return b.String()
}

// raResolver is the RA's DNS settings; a link-local server needs the
// link's name as its zone in resolv.conf.
func raResolver(name string, ra routerAdvert) resolverSource {
	s := resolverSource{Key: "ra " + name, Search: ra.Search}
	for _, a := range ra.DNS {
		if a.IsLinkLocalUnicast() {
			a = a.WithZone(name)
		}
		s.Servers = append(s.Servers, a.String())
	}
	return s
}

// resolverSource is what one lease or RA said about DNS.
type resolverSource struct {
	Key     string // "dhcp4", "dhcp6 eth0", "ra eth0": a newer one replaces
	Servers []string
	Search  []string
}
