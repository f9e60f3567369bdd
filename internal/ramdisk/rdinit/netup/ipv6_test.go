package netup

import (
	"bytes"
	"encoding/hex"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// raBytes is an RA as dnsmasq sends it for "dhcp-range=fd00:1::,ra-stateless"
// plus "dhcp-range=fd00:2::10,fd00:2::20,64" (M set on the second prefix's
// interface): flags, then a prefix option, an RDNSS and a DNSSL.
func raBytes(flags byte, opts ...[]byte) []byte {
	b := []byte{icmpv6RouterAdvert, 0, 0, 0, 64, flags, 0x07, 0x08, 0, 0, 0, 0, 0, 0, 0, 0}
	for _, o := range opts {
		b = append(b, o...)
	}
	return b
}

func prefixOpt(p string, flags byte, valid, preferred uint32) []byte {
	pf := netip.MustParsePrefix(p)
	o := []byte{ndOptPrefixInfo, 4, byte(pf.Bits()), flags}
	o = append(o, be32(valid)...)
	o = append(o, be32(preferred)...)
	o = append(o, 0, 0, 0, 0)
	a := pf.Addr().As16()
	return append(o, a[:]...)
}

func rdnssOpt(life uint32, addrs ...string) []byte {
	o := []byte{ndOptRDNSS, byte(1 + 2*len(addrs)), 0, 0}
	o = append(o, be32(life)...)
	for _, s := range addrs {
		a := netip.MustParseAddr(s).As16()
		o = append(o, a[:]...)
	}
	return o
}

func dnsslOpt(life uint32, names ...string) []byte {
	var wire []byte
	for _, n := range names {
		for l := range strings.SplitSeq(n, ".") {
			wire = append(wire, byte(len(l)))
			wire = append(wire, l...)
		}
		wire = append(wire, 0)
	}
	for (8+len(wire))%8 != 0 {
		wire = append(wire, 0)
	}
	o := []byte{ndOptDNSSL, byte((8 + len(wire)) / 8), 0, 0}
	o = append(o, be32(life)...)
	return append(o, wire...)
}

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

func TestParseRA(t *testing.T) {
	forever := time.Duration(1<<63 - 1)
	for _, tc := range []struct {
		name      string
		in        []byte
		want      routerAdvert
		slaac     bool
		wantError string
	}{
		{"stateless with DNS", raBytes(0x40, prefixOpt("fd00:1::/64", 0xc0, 7200, 3600), rdnssOpt(600, "fd00:1::1", "fd00:1::2"), dnsslOpt(600, "prov.example", "example")),
			routerAdvert{Other: true, RouterLifetime: 1800 * time.Second,
				Prefixes: []raPrefix{{netip.MustParsePrefix("fd00:1::/64"), true, true, 7200 * time.Second, 3600 * time.Second}},
				DNS:      []netip.Addr{netip.MustParseAddr("fd00:1::1"), netip.MustParseAddr("fd00:1::2")},
				Search:   []string{"prov.example", "example"}}, true, ""},
		{"stateful: on-link prefix, no A", raBytes(0xc0, prefixOpt("fd00:2::/64", 0x80, 0xffffffff, 0xffffffff)),
			routerAdvert{Managed: true, Other: true, RouterLifetime: 1800 * time.Second,
				Prefixes: []raPrefix{{netip.MustParsePrefix("fd00:2::/64"), true, false, forever, forever}}}, false, ""},
		{"RDNSS withdrawn", raBytes(0, rdnssOpt(0, "fd00:1::1")), routerAdvert{RouterLifetime: 1800 * time.Second}, false, ""},
		{"SLAAC needs a /64", raBytes(0, prefixOpt("fd00:3::/56", 0xc0, 60, 60)),
			routerAdvert{RouterLifetime: 1800 * time.Second, Prefixes: []raPrefix{{netip.MustParsePrefix("fd00:3::/56"), true, true, time.Minute, time.Minute}}}, false, ""},
		{"unknown option skipped", raBytes(0, []byte{1, 1, 0x52, 0x54, 0, 1, 2, 3}), routerAdvert{RouterLifetime: 1800 * time.Second}, false, ""},
		{"short", []byte{icmpv6RouterAdvert, 0, 0}, routerAdvert{}, false, "3 bytes"},
		{"not an RA", raBytes(0)[:16:16], routerAdvert{}, false, ""},
		{"zero-length option", raBytes(0, []byte{3, 0, 0, 0, 0, 0, 0, 0}), routerAdvert{}, false, "bad length"},
		{"option past the end", raBytes(0, []byte{25, 3, 0, 0, 0, 0, 0, 0}), routerAdvert{}, false, "bad length"},
		{"prefix option too long", raBytes(0, append(prefixOpt("fd00::/64", 0xc0, 1, 1)[:1:1], append([]byte{5}, make([]byte, 38)...)...)), routerAdvert{}, false, "prefix information"},
		{"DNSSL label past the end", raBytes(0, []byte{31, 2, 0, 0, 0, 0, 0, 60, 9, 'a', 0, 0, 0, 0, 0, 0}), routerAdvert{}, false, "label runs past"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "not an RA" {
				tc.in[0] = icmpv6RouterSolicitation
				tc.wantError = "ICMPv6 type 133"
			}
			got, err := parseRA(tc.in)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("error %v, want one with %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if got.slaac() != tc.slaac {
				t.Errorf("slaac() = %v, want %v", got.slaac(), tc.slaac)
			}
		})
	}
}

// FuzzParseRA: any bytes from the wire give an RA or an error, never a
// panic, and every prefix is a valid masked prefix.
func FuzzParseRA(f *testing.F) {
	f.Add(raBytes(0x40, prefixOpt("fd00:1::/64", 0xc0, 7200, 3600), rdnssOpt(600, "fd00:1::1"), dnsslOpt(600, "prov.example")))
	f.Add(raBytes(0xc0, prefixOpt("fd00:2::/64", 0x80, 0xffffffff, 0xffffffff)))
	f.Add([]byte{icmpv6RouterAdvert})
	f.Fuzz(func(t *testing.T, b []byte) {
		ra, err := parseRA(b)
		if err != nil {
			return
		}
		for _, p := range ra.Prefixes {
			if !p.Prefix.IsValid() || p.Prefix != p.Prefix.Masked() {
				t.Fatalf("prefix %v", p.Prefix)
			}
		}
		_ = ra.slaac()
	})
}

// The client identifier and IAID an operator writes into a reservation:
// DUID-LL from the MAC, the MAC's last four bytes.
func TestDHCPv6Identity(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:12:34:41")
	if got, want := hex.EncodeToString(dhcpv6ClientID(mac).ToBytes()), "00030001525400123441"; got != want {
		t.Errorf("DUID %s, want %s", got, want)
	}
	if got := dhcpv6IAID(mac); !bytes.Equal(got[:], []byte{0, 0x12, 0x34, 0x41}) {
		t.Errorf("IAID % x", got)
	}
}

func TestResolvConf(t *testing.T) {
	got := resolvConf([]resolverSource{
		{Key: "dhcp4", Servers: []string{"10.0.0.1"}, Search: []string{"example"}},
		{Key: "dhcp6 eth0", Servers: []string{"fd00::53", "10.0.0.1"}, Search: []string{"example", "v6.example"}},
		{Key: "ra eth0", Servers: []string{"fe80::1%eth0"}},
	})
	want := "# written by ironic-agent init from the DHCP lease\nsearch example v6.example\nnameserver 10.0.0.1\nnameserver fd00::53\nnameserver fe80::1%eth0\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// A v4 lease alone writes what the init wrote before IPv6.
	if got := resolvConf([]resolverSource{{Key: "dhcp4", Servers: []string{"10.0.0.1"}}}); got != "# written by ironic-agent init from the DHCP lease\nnameserver 10.0.0.1\n" {
		t.Errorf("v4 only: %q", got)
	}
}

func TestRAResolverZone(t *testing.T) {
	s := raResolver("eth0", routerAdvert{DNS: []netip.Addr{netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fd00::1")}})
	if want := []string{"fe80::1%eth0", "fd00::1"}; !reflect.DeepEqual(s.Servers, want) {
		t.Errorf("servers %v, want %v", s.Servers, want)
	}
}
