package bmc

import (
	"context"
	"errors"
	"testing"
)

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestDetect(t *testing.T) {
	const (
		slaac  = 1
		dhcpv6 = 2
		static = 0
	)
	for _, tc := range []struct {
		name           string
		channels       map[uint8]simChannel
		ipv4, ipv6, mc string
	}{
		{"no LAN channel", nil, "0.0.0.0", "::/0", "<nil>"},
		{"serial channel only", map[uint8]simChannel{1: {medium: 0x05}}, "0.0.0.0", "::/0", "<nil>"},
		{"IPv4 and MAC on channel 1",
			map[uint8]simChannel{1: {medium: 4, ipv4: "192.0.2.10", mac: "AA:BB:CC:00:11:22", enables: 0}},
			"192.0.2.10", "::/0", "aa:bb:cc:00:11:22"},
		{"channel 1 unconfigured, channel 2 configured",
			map[uint8]simChannel{
				1: {medium: 4, ipv4: "0.0.0.0", mac: "02:00:00:00:00:01", enables: 0},
				2: {medium: 6, ipv4: "198.51.100.7", mac: "02:00:00:00:00:02", enables: -1},
			},
			"198.51.100.7", "::/0", "02:00:00:00:00:02"},
		{"IPv6 only: the MAC counts because of a routable IPv6 address",
			map[uint8]simChannel{1: {medium: 4, ipv4: "0.0.0.0", mac: "02:00:00:00:00:03", enables: 1,
				static: []IPv6Address{v6("2001:db8::7", static, true, 0)}}},
			"0.0.0.0", "2001:db8::7", "02:00:00:00:00:03"},
		{"dynamic before static, inactive and :: skipped",
			map[uint8]simChannel{1: {medium: 4, ipv4: "192.0.2.1", mac: "02:00:00:00:00:04", enables: 2,
				dynamic: []IPv6Address{v6("::", dhcpv6, false, 0), v6("2001:db8::1", slaac, false, 2), v6("2001:db8::2", dhcpv6, false, 0)},
				static:  []IPv6Address{v6("2001:db8::3", static, true, 0)}}},
			"192.0.2.1", "2001:db8::2", "02:00:00:00:00:04"},
		{"disabled static address is not reported",
			map[uint8]simChannel{1: {medium: 4, ipv4: "192.0.2.1", mac: "02:00:00:00:00:04", enables: 2,
				static: []IPv6Address{v6("2001:db8::3", static, false, 0)}}},
			"192.0.2.1", "::/0", "02:00:00:00:00:04"},
		{"IPv6 enabled on channel 1 without addresses: channel 3 has one",
			map[uint8]simChannel{
				1: {medium: 4, ipv4: "192.0.2.1", mac: "02:00:00:00:00:05", enables: 2},
				3: {medium: 4, ipv4: "0.0.0.0", mac: "02:00:00:00:00:06", enables: 1,
					dynamic: []IPv6Address{v6("2001:db8::9", slaac, false, 0)}},
			},
			"192.0.2.1", "2001:db8::9", "02:00:00:00:00:05"},
		{"link-local IPv6 does not make a MAC usable, zero MAC skipped",
			map[uint8]simChannel{
				1: {medium: 4, ipv4: "0.0.0.0", mac: "02:00:00:00:00:07", enables: 1,
					dynamic: []IPv6Address{v6("fe80::1", slaac, false, 0)}},
				2: {medium: 4, ipv4: "192.0.2.2", mac: "00:00:00:00:00:00", enables: 0},
			},
			"192.0.2.2", "fe80::1", "<nil>"},
		{"IP address parameter unsupported: no MAC from that channel",
			map[uint8]simChannel{1: {medium: 4, mac: "02:00:00:00:00:08", enables: 0}},
			"0.0.0.0", "::/0", "<nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(t.Context(), simReplay(t, tc.channels), nil)
			if err != nil {
				t.Fatal(err)
			}
			if str(got.IPv4) != tc.ipv4 || str(got.IPv6) != tc.ipv6 || str(got.MAC) != tc.mc {
				t.Errorf("got %s %s %s, want %s %s %s", str(got.IPv4), str(got.IPv6), str(got.MAC), tc.ipv4, tc.ipv6, tc.mc)
			}
		})
	}
}

// A BMC that answers nothing (every request times out) still gives IPA's
// "0.0.0.0" and "::/0": the device exists, so IPMI "works".
func TestDetectSilentBMC(t *testing.T) {
	r, err := NewReplay(Recording{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Detect(t.Context(), r, nil)
	if err != nil || str(got.IPv4) != "0.0.0.0" || str(got.IPv6) != "::/0" || got.MAC != nil {
		t.Errorf("got %s %s %s, %v", str(got.IPv4), str(got.IPv6), str(got.MAC), err)
	}
}

func TestDetectCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Detect(ctx, simReplay(t, nil), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("want context.Canceled, got %v", err)
	}
}

func TestRecorderReplaysWhatItSaw(t *testing.T) {
	sim := simReplay(t, map[uint8]simChannel{2: {medium: 4, ipv4: "192.0.2.44", mac: "02:00:00:00:00:44", enables: 2,
		dynamic: []IPv6Address{v6("2001:db8::44", 2, false, 0)}}})
	rec := &Recorder{Next: sim}
	first, err := Detect(t.Context(), rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/ipmi.json"
	if err := rec.Recording("test").WriteFile(path); err != nil {
		t.Fatal(err)
	}
	replay, err := LoadReplay(path)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Detect(t.Context(), replay, nil)
	if err != nil {
		t.Fatal(err)
	}
	if str(first.IPv4) != str(again.IPv4) || str(first.IPv6) != str(again.IPv6) || str(first.MAC) != str(again.MAC) ||
		str(again.IPv4) != "192.0.2.44" || str(again.IPv6) != "2001:db8::44" || str(again.MAC) != "02:00:00:00:00:44" {
		t.Errorf("live %+v, replayed %+v", first, again)
	}
}

func TestLoadReplayRejectsBadFiles(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"not json", "{"},
		{"unknown field", `{"exchanges":[],"bogus":1}`},
		{"bad hex", `{"exchanges":[{"netfn":6,"cmd":66,"request":"zz","response":"00"}]}`},
		{"no answer", `{"exchanges":[{"netfn":6,"cmd":66,"request":"01"}]}`},
		{"duplicate", `{"exchanges":[{"netfn":6,"cmd":66,"request":"01","response":"00"},{"netfn":6,"cmd":66,"request":"01","response":"cc"}]}`},
	} {
		path := t.TempDir() + "/ipmi.json"
		if err := writeFile(path, tc.body); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadReplay(path); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// countingTransport never answers and counts the requests.
type countingTransport struct{ n int }

func (c *countingTransport) Send(context.Context, Request) ([]byte, error) {
	c.n++
	return nil, errors.New("timed out")
}

// A BMC that never answers is given up on after a few requests instead of
// costing every one of them its timeout.
func TestDetectGivesUpOnASilentBMC(t *testing.T) {
	ct := &countingTransport{}
	got, err := Detect(t.Context(), ct, nil)
	if err != nil || str(got.IPv4) != "0.0.0.0" {
		t.Fatalf("got %+v, %v", got, err)
	}
	if ct.n != maxSilent {
		t.Errorf("asked %d times, want %d", ct.n, maxSilent)
	}
}

func TestDecodeDeviceID(t *testing.T) {
	id, err := DecodeDeviceID([]byte{0x20, 0x01, 0x01, 0x71, 0x02, 0xbf, 0x7c, 0x2a, 0x00, 0x5b, 0x09})
	if err != nil {
		t.Fatal(err)
	}
	want := DeviceID{DeviceID: 0x20, DeviceRevision: 1, Firmware: "1.71", IPMIVersion: "2.0", ManufacturerID: 10876, ProductID: 0x095b}
	if id != want {
		t.Errorf("got %+v, want %+v", id, want)
	}
	if _, err := DecodeDeviceID([]byte{0x20}); err == nil {
		t.Error("short response accepted")
	}
}
