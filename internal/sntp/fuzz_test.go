package sntp

import (
	"bytes"
	"net/netip"
	"testing"
	"time"
)

// FuzzParsePacket: any bytes from the network parse or fail without a
// panic, a parsed header re-encodes to the same 48 bytes, and validation
// of it never panics.
func FuzzParsePacket(f *testing.F) {
	req := packet{Version: version, Mode: modeClient, Transmit: 0x0123456789abcdef}
	f.Add(req.marshal())
	f.Add(answer(req, time.Hour).marshal())
	kiss := answer(req, 0)
	kiss.Stratum, kiss.RefID = 0, [4]byte{'D', 'E', 'N', 'Y'}
	f.Add(kiss.marshal())
	f.Add([]byte{})
	f.Add(make([]byte, 47))
	f.Add(append(answer(req, 0).marshal(), make([]byte, 20)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePacket(b)
		if err != nil {
			if len(b) >= packetLen {
				t.Fatalf("%d bytes refused: %v", len(b), err)
			}
			return
		}
		if got := p.marshal(); !bytes.Equal(got, b[:packetLen]) {
			t.Fatalf("re-encoded %x, want %x", got, b[:packetLen])
		}
		_ = p.validate(p.Originate)
		_ = ntpTime(p.Transmit)
	})
}

// FuzzParseServer: a kernel parameter value is accepted only as an IP
// address or a name of IPA's characters, and never panics the parser.
func FuzzParseServer(f *testing.F) {
	for _, s := range []string{"192.0.2.1", "[2001:db8::1]", "ntp.example.com", "a,b", "[x]", "", "fe80::1%eth0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseServer(s)
		if err != nil {
			return
		}
		if _, ipErr := netip.ParseAddr(got); ipErr != nil && (len(got) > 253 || !hostnameRE.MatchString(got)) {
			t.Fatalf("ParseServer(%q) = %q", s, got)
		}
		if again, err := ParseServer(got); err != nil || again != got {
			t.Fatalf("ParseServer(%q) = %q, then %q, %v", s, got, again, err)
		}
	})
}
