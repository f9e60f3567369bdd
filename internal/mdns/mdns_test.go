package mdns

import (
	"log/slog"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/ironic-go/ironic-agent/internal/logging"
)

const baremetal = "baremetal." + Domain

// answer builds a response holding srv (port), txt and addrs of host,
// the addresses in the additional section as responders put them.
func answer(t testing.TB, host string, port uint16, txt []string, addrs ...netip.Addr) []byte {
	t.Helper()
	owner := dnsmessage.MustNewName(baremetal)
	target := dnsmessage.MustNewName(host)
	m := dnsmessage.Message{Header: dnsmessage.Header{Response: true, Authoritative: true}}
	m.Answers = append(m.Answers,
		dnsmessage.Resource{Header: dnsmessage.ResourceHeader{Name: owner, Class: dnsmessage.ClassINET, TTL: 120},
			Body: &dnsmessage.SRVResource{Port: port, Target: target}},
		dnsmessage.Resource{Header: dnsmessage.ResourceHeader{Name: owner, Class: dnsmessage.ClassINET, TTL: 4500},
			Body: &dnsmessage.TXTResource{TXT: txt}})
	for _, a := range addrs {
		h := dnsmessage.ResourceHeader{Name: target, Class: dnsmessage.ClassINET, TTL: 120}
		if a.Is4() {
			m.Additionals = append(m.Additionals, dnsmessage.Resource{Header: h, Body: &dnsmessage.AResource{A: a.As4()}})
		} else {
			m.Additionals = append(m.Additionals, dnsmessage.Resource{Header: h, Body: &dnsmessage.AAAAResource{AAAA: a.As16()}})
		}
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newRecords() *records {
	return &records{srv: map[string]dnsmessage.SRVResource{}, txt: map[string][]string{}, addrs: map[string][]netip.Addr{}}
}

var from = &net.UDPAddr{IP: net.IPv4(192, 0, 2, 1), Port: Port}

// TestEndpoint: the URL as IPA's get_endpoint builds it from the records.
func TestEndpoint(t *testing.T) {
	for name, c := range map[string]struct {
		host  string
		port  uint16
		txt   []string
		addrs []netip.Addr
		want  string
	}{
		"http on 80, no protocol key":   {"h.local.", 80, nil, []netip.Addr{netip.MustParseAddr("127.0.0.1")}, ""},
		"port 6385, protocol key":       {"baremetal." + Domain, 6385, []string{"protocol=http", "ipa_debug=True"}, []netip.Addr{netip.MustParseAddr("192.0.2.1")}, "http://192.0.2.1:6385"},
		"https by default, with a path": {"h.local.", 443, []string{"path=/baremetal"}, []netip.Addr{netip.MustParseAddr("192.0.2.1")}, "https://192.0.2.1:443/baremetal"},
		"IPv6 in brackets":              {"h.local.", 6385, []string{"protocol=https"}, []netip.Addr{netip.MustParseAddr("::1"), netip.MustParseAddr("2001:db8::5")}, "https://[2001:db8::5]:6385"},
		"a name not in .local. is kept": {"ironic.example.org.", 6385, []string{"protocol=http"}, []netip.Addr{netip.MustParseAddr("192.0.2.9")}, "http://ironic.example.org:6385"},
	} {
		r := newRecords()
		r.add(answer(t, c.host, c.port, c.txt, c.addrs...), from, discard())
		ep, err := r.endpoint(baremetal, discard())
		if c.want == "" {
			if err == nil {
				t.Errorf("%s: %+v, want an error (loopback only)", name, ep)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if ep.URL != c.want {
			t.Errorf("%s: URL %q, want %q", name, ep.URL, c.want)
		}
		if _, ok := ep.Params["protocol"]; ok {
			t.Errorf("%s: protocol left in the params %v", name, ep.Params)
		}
	}
}

func TestEndpointMissing(t *testing.T) {
	r := newRecords()
	if _, err := r.endpoint(baremetal, discard()); err == nil || err.Error() != "no SRV record answered" {
		t.Errorf("empty: %v", err)
	}
	r.add(answer(t, "h.local.", 6385, nil), from, discard())
	if _, err := r.endpoint(baremetal, discard()); err == nil || err.Error() != "no address answered for the SRV record's host h.local." {
		t.Errorf("no address: %v", err)
	}
	r = newRecords()
	r.add(answer(t, "h.local.", 6385, []string{"\xff=1"}, netip.MustParseAddr("192.0.2.1")), from, discard())
	if _, err := r.endpoint(baremetal, discard()); err == nil {
		t.Errorf("a key that is not UTF-8 must make the record unusable")
	}
}

// FuzzAdd: answers are outside bytes, from anyone on the network.
func FuzzAdd(f *testing.F) {
	f.Add(answer(f, "h.local.", 6385, []string{"protocol=http", "ipa_debug=True"}, netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("fe80::1")))
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newRecords()
		r.add(b, from, discard())
		_ = r.complete(baremetal)
		_, _ = r.endpoint(baremetal, discard())
	})
}

func discard() *slog.Logger { return logging.OrDiscard(nil) }
