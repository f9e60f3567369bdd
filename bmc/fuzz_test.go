package bmc

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
)

// chunkTransport answers each request with the next chunk of a fuzz input:
// a length byte, then that many bytes (0xff as length means "no answer").
type chunkTransport struct{ b []byte }

func (c *chunkTransport) Send(_ context.Context, _ Request) ([]byte, error) {
	if len(c.b) == 0 {
		return nil, errors.New("timed out")
	}
	n := int(c.b[0])
	c.b = c.b[1:]
	if n == 0xff {
		return nil, errors.New("timed out")
	}
	n = min(n, len(c.b))
	out := c.b[:n]
	c.b = c.b[n:]
	return out, nil
}

// FuzzDetect feeds arbitrary BMC replies to the whole detection: it must
// never panic, and whatever it reports must be a well-formed address.
func FuzzDetect(f *testing.F) {
	chunks := func(replies ...[]byte) []byte {
		var b []byte
		for _, r := range replies {
			b = append(b, byte(len(r)))
			b = append(b, r...)
		}
		return b
	}
	lan := []byte{0x00, 0x01, 0x04, 0x01, 0x82, 0xf2, 0x1b, 0x00, 0x00, 0x00}
	f.Add(chunks(lan, []byte{0, 0x11, 192, 0, 2, 1}, []byte{0, 0x11, 2, 0, 0, 0, 0, 1}, []byte{0, 0x11, 2},
		append([]byte{0, 0x11, 0, 2, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 64, 0), []byte{0xc9}, []byte{0xc9}))
	f.Add(chunks([]byte{0xcc}, []byte{0xcc}))
	f.Add(chunks(lan, []byte{0}, []byte{0, 0x11}, []byte{}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Detect(t.Context(), &chunkTransport{b: b}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.IPv4 == nil || got.IPv6 == nil {
			t.Fatal("an existing device must give non-null addresses")
		}
		if a, err := netip.ParseAddr(*got.IPv4); err != nil || !a.Is4() {
			t.Fatalf("bmc_address %q", *got.IPv4)
		}
		if *got.IPv6 != "::/0" {
			if a, err := netip.ParseAddr(*got.IPv6); err != nil || !a.Is6() || a.IsUnspecified() {
				t.Fatalf("bmc_v6address %q", *got.IPv6)
			}
		}
		if got.MAC != nil {
			if m, err := net.ParseMAC(*got.MAC); err != nil || len(m) != 6 || *got.MAC == "00:00:00:00:00:00" {
				t.Fatalf("bmc_mac %q", *got.MAC)
			}
		}
	})
}
