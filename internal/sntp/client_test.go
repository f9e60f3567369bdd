package sntp

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer answers NTP requests on 127.0.0.1 with what reply makes of
// each request; a nil reply is no answer. reply gets the request number
// (from 0) and may sleep.
type fakeServer struct {
	conn *net.UDPConn
	// other sends from 127.0.0.2 when reply asks for it.
	other *net.UDPConn
	mu    sync.Mutex
	reqs  int
}

type fakeReply struct {
	data      []byte
	fromOther bool
	after     time.Duration
}

func startFake(t *testing.T, reply func(n int, req packet) []fakeReply) *fakeServer {
	t.Helper()
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	other, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{conn: conn, other: other}
	done := make(chan struct{})
	t.Cleanup(func() { conn.Close(); other.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 512)
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			req, err := parsePacket(buf[:n])
			if err != nil {
				continue
			}
			s.mu.Lock()
			i := s.reqs
			s.reqs++
			s.mu.Unlock()
			for _, r := range reply(i, req) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(r.after)
					c := conn
					if r.fromOther {
						c = other
					}
					_, _ = c.WriteToUDPAddrPort(r.data, from)
				}()
			}
		}
	}()
	return s
}

func (s *fakeServer) port() int { return s.conn.LocalAddr().(*net.UDPAddr).Port }

func (s *fakeServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs
}

// answer is a correct reply to req from a server whose clock is ahead of
// ours by skew.
func answer(req packet, skew time.Duration) packet {
	now := time.Now().Add(skew)
	return packet{Version: version, Mode: modeServer, Stratum: 2, RefID: [4]byte{192, 0, 2, 1},
		Reference: ntpTimestamp(now.Add(-time.Minute)), Originate: req.Transmit,
		Receive: ntpTimestamp(now), Transmit: ntpTimestamp(now)}
}

func one(p packet) []fakeReply { return []fakeReply{{data: p.marshal()}} }

func client(s *fakeServer) Client {
	return Client{Port: s.port(), Samples: 3, Timeout: 300 * time.Millisecond}
}

func TestQueryOffset(t *testing.T) {
	for _, skew := range []time.Duration{0, time.Hour, -time.Hour, 90 * 24 * time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			s := startFake(t, func(_ int, req packet) []fakeReply { return one(answer(req, skew)) })
			got, err := client(s).Query(t.Context(), "127.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			if d := got.Offset - skew; d < -50*time.Millisecond || d > 50*time.Millisecond {
				t.Errorf("offset %v, want %v", got.Offset, skew)
			}
			if got.Stratum != 2 || got.Server.String() != "127.0.0.1:"+strconv.Itoa(s.port()) {
				t.Errorf("sample %+v", got)
			}
			if s.requests() != 3 {
				t.Errorf("%d requests, want 3", s.requests())
			}
		})
	}
}

// TestQueryKeepsShortestDelay: the second of three replies is held back
// 150 ms and claims a clock 10 s ahead; the fast ones say 0.
func TestQueryKeepsShortestDelay(t *testing.T) {
	s := startFake(t, func(n int, req packet) []fakeReply {
		if n == 1 {
			return []fakeReply{{data: answer(req, 10*time.Second).marshal(), after: 150 * time.Millisecond}}
		}
		return one(answer(req, 0))
	})
	got, err := client(s).Query(t.Context(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Offset > time.Second || got.Delay > 100*time.Millisecond {
		t.Errorf("kept the slow reply: %v", got)
	}
}

func TestQueryRefusals(t *testing.T) {
	type craft func(req packet) packet
	cases := []struct {
		name  string
		craft craft
		want  string
	}{
		{"wrong originate", func(req packet) packet { p := answer(req, time.Hour); p.Originate++; return p }, "i/o timeout"},
		{"client mode", func(req packet) packet { p := answer(req, time.Hour); p.Mode = modeClient; return p }, "i/o timeout"},
		{"kiss of death", func(req packet) packet {
			p := answer(req, time.Hour)
			p.Stratum, p.Leap, p.RefID = 0, leapUnsynchronised, [4]byte{'D', 'E', 'N', 'Y'}
			return p
		}, `kiss-o'-death "DENY"`},
		{"stratum 0", func(req packet) packet {
			p := answer(req, time.Hour)
			p.Stratum = 0
			p.RefID = [4]byte{1, 2, 3, 4}
			return p
		}, `kiss-o'-death "01020304"`},
		{"unsynchronised", func(req packet) packet { p := answer(req, time.Hour); p.Leap = leapUnsynchronised; return p }, "leap indicator 3"},
		{"stratum 16", func(req packet) packet { p := answer(req, time.Hour); p.Stratum = 16; return p }, "stratum 16"},
		{"zero transmit", func(req packet) packet { p := answer(req, time.Hour); p.Transmit = 0; return p }, "no transmit timestamp"},
		{"zero receive", func(req packet) packet { p := answer(req, time.Hour); p.Receive = 0; return p }, "no receive timestamp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := startFake(t, func(_ int, req packet) []fakeReply { return one(c.craft(req)) })
			got, err := client(s).Query(t.Context(), "127.0.0.1")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, %v; want an error with %q", got, err, c.want)
			}
		})
	}
}

// TestKissStopsAtOnce: RFC 4330 says a client must stop after a KoD.
func TestKissStopsAtOnce(t *testing.T) {
	s := startFake(t, func(_ int, req packet) []fakeReply {
		p := answer(req, 0)
		p.Stratum, p.RefID = 0, [4]byte{'R', 'A', 'T', 'E'}
		return one(p)
	})
	_, err := client(s).Query(t.Context(), "127.0.0.1")
	var kiss *KissError
	if !errors.As(err, &kiss) || kiss.Code != "RATE" {
		t.Fatalf("got %v, want a RATE kiss", err)
	}
	if s.requests() != 1 {
		t.Errorf("%d requests after a kiss, want 1", s.requests())
	}
}

// TestQueryIgnoresStrangers: a forged reply from 127.0.0.2 and garbage
// arrive first; the real reply after them is used.
func TestQueryIgnoresStrangers(t *testing.T) {
	s := startFake(t, func(_ int, req packet) []fakeReply {
		return []fakeReply{
			{data: answer(req, time.Hour).marshal(), fromOther: true},
			{data: []byte("not NTP"), after: 20 * time.Millisecond},
			{data: answer(req, 0).marshal(), after: 40 * time.Millisecond},
		}
	})
	got, err := client(s).Query(t.Context(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Offset > time.Second {
		t.Errorf("took the forged reply: %v", got)
	}
}

// TestQueryLateReplies: a reply that misses its timeout is not taken for
// the answer to the next request (its originate is the old request's).
func TestQueryLateReplies(t *testing.T) {
	s := startFake(t, func(n int, req packet) []fakeReply {
		if n == 0 {
			return []fakeReply{{data: answer(req, time.Hour).marshal(), after: 350 * time.Millisecond}}
		}
		return []fakeReply{{data: answer(req, 0).marshal(), after: 100 * time.Millisecond}}
	})
	c := client(s)
	c.Samples = 2
	got, err := c.Query(t.Context(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Offset > time.Second {
		t.Errorf("took the late reply to the first request: %v", got)
	}
}

func TestQueryNoAnswer(t *testing.T) {
	s := startFake(t, func(int, packet) []fakeReply { return nil })
	start := time.Now()
	_, err := client(s).Query(t.Context(), "127.0.0.1")
	if err == nil || !strings.Contains(err.Error(), "no valid reply to 3 requests") {
		t.Fatalf("got %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("took %v for 3 × 300 ms", el)
	}
}

func TestQueryContextCancel(t *testing.T) {
	s := startFake(t, func(int, packet) []fakeReply { return nil })
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	c := client(s)
	c.Timeout = time.Minute
	start := time.Now()
	_, err := c.Query(ctx, "127.0.0.1")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("cancel took %v", el)
	}
}

func TestQueryHostName(t *testing.T) {
	s := startFake(t, func(_ int, req packet) []fakeReply { return one(answer(req, time.Hour)) })
	got, err := client(s).Query(t.Context(), "localhost")
	if err != nil {
		// localhost may resolve to ::1 first: that address does not answer,
		// and the next one is tried.
		t.Fatal(err)
	}
	if d := got.Offset - time.Hour; d < -50*time.Millisecond || d > 50*time.Millisecond {
		t.Errorf("offset %v", got.Offset)
	}
}

func TestQueryIPv6(t *testing.T) {
	conn, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer conn.Close()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if req, err := parsePacket(buf[:n]); err == nil {
				_, _ = conn.WriteToUDPAddrPort(answer(req, -time.Hour).marshal(), from)
			}
		}
	}()
	c := Client{Port: conn.LocalAddr().(*net.UDPAddr).Port, Samples: 2, Timeout: time.Second}
	for _, server := range []string{"::1", "[::1]"} {
		got, err := c.Query(t.Context(), server)
		if err != nil {
			t.Fatal(err)
		}
		if d := got.Offset + time.Hour; d < -50*time.Millisecond || d > 50*time.Millisecond {
			t.Errorf("%s: offset %v", server, got.Offset)
		}
	}
}

func TestParseServer(t *testing.T) {
	ok := map[string]string{
		"192.0.2.1": "192.0.2.1", "2001:db8::1": "2001:db8::1", "[2001:db8::1]": "2001:db8::1",
		"ntp.example.com": "ntp.example.com", "pool_1.ntp": "pool_1.ntp", "fe80::1%eth0": "fe80::1%eth0",
	}
	for in, want := range ok {
		if got, err := ParseServer(in); err != nil || got != want {
			t.Errorf("ParseServer(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a b", "a,b", "ntp;reboot", "[192.0.2.1]", "[ntp]", "$(x)", strings.Repeat("a", 254)} {
		if got, err := ParseServer(bad); err == nil {
			t.Errorf("ParseServer(%q) = %q, want an error", bad, got)
		}
	}
}

func TestTimestamps(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 11, 25, 4, 30, 0, 123456789, time.UTC),
		time.Date(2036, 2, 7, 6, 28, 15, 0, time.UTC),
		time.Date(2036, 2, 7, 6, 28, 16, 0, time.UTC),
		time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		got := ntpTime(ntpTimestamp(tm))
		if d := got.Sub(tm); d < -time.Nanosecond || d > time.Nanosecond {
			t.Errorf("%v round-trips to %v", tm, got)
		}
	}
	// RFC 5905's example: 0x83aa7e80 is 1970-01-01.
	if got := ntpTime(0x83aa7e80 << 32); !got.Equal(time.Unix(0, 0)) {
		t.Errorf("0x83aa7e80 is %v", got)
	}
}
