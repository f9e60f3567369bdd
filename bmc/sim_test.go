package bmc

import (
	"encoding/hex"
	"net"
	"net/netip"
	"os"
	"testing"
)

// simChannel describes one channel of a simulated BMC; the zero value is a
// channel Get Channel Info refuses.
type simChannel struct {
	medium  uint8  // 0: Get Channel Info fails with 0xcc
	ipv4    string // "": parameter 3 not supported (0x80)
	mac     string
	enables int // -1: parameter 51 not supported
	dynamic []IPv6Address
	static  []IPv6Address
}

// simRecording builds the exchanges a BMC with these channels (1-based
// index) answers Detect with.
func simRecording(t testing.TB, channels map[uint8]simChannel) Recording {
	t.Helper()
	var rec Recording
	add := func(netfn, cmd uint8, req []byte, resp []byte) {
		rec.Exchanges = append(rec.Exchanges, Exchange{NetFn: netfn, Cmd: cmd, Request: hex.EncodeToString(req), Response: hex.EncodeToString(resp)})
	}
	lanParam := func(ch, param, set uint8, data []byte) {
		req := []byte{ch, param, set, 0}
		if data == nil {
			add(NetFnTransport, CmdGetLANConfParam, req, []byte{0x80})
			return
		}
		add(NetFnTransport, CmdGetLANConfParam, req, append([]byte{0x00, 0x11}, data...))
	}
	// Get Device ID: a Supermicro BMC (manufacturer 10876), firmware 1.71,
	// IPMI 2.0.
	add(NetFnApp, CmdGetDeviceID, nil, []byte{0x00, 0x20, 0x01, 0x01, 0x71, 0x02, 0xbf, 0x7c, 0x2a, 0x00, 0x5b, 0x09})
	for ch := uint8(1); ch <= 11; ch++ {
		c, ok := channels[ch]
		if !ok || c.medium == 0 {
			add(NetFnApp, CmdGetChannelInfo, []byte{ch}, []byte{0xcc})
			continue
		}
		add(NetFnApp, CmdGetChannelInfo, []byte{ch}, []byte{0x00, ch, c.medium, 0x01, 0x82, 0xf2, 0x1b, 0x00, 0x00, 0x00})
		if c.medium != medium8023LAN && c.medium != mediumOtherLAN {
			continue
		}
		var ip4 []byte
		if c.ipv4 != "" {
			a := netip.MustParseAddr(c.ipv4).As4()
			ip4 = a[:]
		}
		lanParam(ch, paramIPAddress, 0, ip4)
		var mac []byte
		if c.mac != "" {
			m, err := net.ParseMAC(c.mac)
			if err != nil {
				t.Fatal(err)
			}
			mac = m
		}
		lanParam(ch, paramMACAddress, 0, mac)
		if c.enables >= 0 {
			lanParam(ch, paramIPv6Enables, 0, []byte{byte(c.enables)})
		} else {
			lanParam(ch, paramIPv6Enables, 0, nil)
		}
		sets := func(param uint8, addrs []IPv6Address) {
			for i, a := range addrs {
				src := a.Source
				if a.Enabled {
					src |= 0x80
				}
				b := a.Addr.As16()
				data := append([]byte{byte(i), src}, b[:]...)
				lanParam(ch, param, uint8(i), append(data, a.PrefixLen, a.Status))
			}
			add(NetFnTransport, CmdGetLANConfParam, []byte{ch, param, uint8(len(addrs)), 0}, []byte{0xc9})
		}
		sets(paramIPv6DynamicAddr, c.dynamic)
		sets(paramIPv6StaticAddr, c.static)
	}
	return rec
}

func simReplay(t testing.TB, channels map[uint8]simChannel) *Replay {
	t.Helper()
	r, err := NewReplay(simRecording(t, channels))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func v6(s string, source uint8, enabled bool, status uint8) IPv6Address {
	return IPv6Address{Addr: netip.MustParseAddr(s), Source: source, Enabled: enabled, PrefixLen: 64, Status: status}
}

func writeFile(path, body string) error { return os.WriteFile(path, []byte(body), 0o644) }
