package sntp

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/lazyregexp"
)

// Sample is one server's answer: how far the local clock is behind it.
type Sample struct {
	Server netip.AddrPort
	// Offset is what to add to the local clock: ((T2-T1)+(T3-T4))/2.
	Offset time.Duration
	// Delay is the round trip minus the server's processing time.
	Delay   time.Duration
	Stratum uint8
}

// Client queries NTP servers. The zero value asks 4 times on port 123 and
// waits 2 s for each reply.
type Client struct {
	// Port is the server's UDP port (123).
	Port int
	// Samples is how many requests are sent to an address (4, as ntpdate);
	// the reply with the shortest delay is kept.
	Samples int
	// Timeout bounds the wait for each reply (2 s).
	Timeout time.Duration
	// Resolver resolves host names (net.DefaultResolver).
	Resolver *net.Resolver
}

// hostnameRE is IPA's _VALID_NTP_SERVER_RE: what it lets reach ntpdate or
// chronyd when the value is not an IP address.
var hostnameRE = lazyregexp.New(`^[a-zA-Z0-9.:_-]+$`)

// ParseServer checks an ntp_server value as IPA does: one IP address or
// host name of at most 253 characters (no list, no port). An IPv6 literal
// may also come in brackets, as in URLs; they are removed.
func ParseServer(s string) (string, error) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		inner := s[1 : len(s)-1]
		if a, err := netip.ParseAddr(inner); err == nil && a.Is6() {
			return inner, nil
		}
		return "", fmt.Errorf("invalid NTP server address %q: brackets around something else than an IPv6 address", s)
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return s, nil
	}
	if s != "" && len(s) <= 253 && hostnameRE.MatchString(s) {
		return s, nil
	}
	return "", fmt.Errorf("invalid NTP server address %q: not an IP address or host name", s)
}

// Query measures the offset from server (a value ParseServer accepts). A
// host name is resolved and its addresses are tried in turn until one
// answers. A kiss-o'-death ends the queries to that address at once.
func (c Client) Query(ctx context.Context, server string) (Sample, error) {
	host, err := ParseServer(server)
	if err != nil {
		return Sample{}, err
	}
	port := c.Port
	if port == 0 {
		port = 123
	}
	addrs, err := c.resolve(ctx, host)
	if err != nil {
		return Sample{}, err
	}
	var errs []error
	for _, a := range addrs {
		s, err := c.queryAddr(ctx, netip.AddrPortFrom(a, uint16(port)))
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return Sample{}, fmt.Errorf("NTP server %s: %w", server, errors.Join(errs...))
}

func (c Client) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	r := c.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolving NTP server %s: %w", host, err)
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	return addrs, nil
}

// queryAddr sends Samples requests to one address, one after the other,
// and keeps the reply with the shortest delay.
func (c Client) queryAddr(ctx context.Context, addr netip.AddrPort) (Sample, error) {
	network := "udp4"
	if addr.Addr().Is6() {
		network = "udp6"
	}
	// Not connected: a reply from another address is seen, and dropped,
	// here rather than by the kernel, so the rule is the package's own.
	conn, err := net.ListenUDP(network, nil)
	if err != nil {
		return Sample{}, fmt.Errorf("NTP socket for %s: %w", addr, err)
	}
	defer conn.Close()
	// A cancelled context wakes a blocked read.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()

	n := c.Samples
	if n <= 0 {
		n = 4
	}
	var best *Sample
	var lastErr error
	for range n {
		s, err := c.exchange(ctx, conn, addr)
		if err != nil {
			var kiss *KissError
			if errors.As(err, &kiss) || ctx.Err() != nil {
				return Sample{}, fmt.Errorf("%s: %w", addr, err)
			}
			lastErr = err
			continue
		}
		if best == nil || s.Delay < best.Delay {
			best = &s
		}
	}
	if best == nil {
		return Sample{}, fmt.Errorf("%s: no valid reply to %d requests; last: %w", addr, n, lastErr)
	}
	return *best, nil
}

// exchange sends one request and waits for its reply.
func (c Client) exchange(ctx context.Context, conn *net.UDPConn, addr netip.AddrPort) (Sample, error) {
	// The transmit timestamp is a random number (as chrony sends): the
	// server echoes it as the originate timestamp, which matches the reply
	// to this request and tells nothing of the local clock. T1 is kept here.
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return Sample{}, fmt.Errorf("random transmit timestamp: %w", err)
	}
	sent := binary.BigEndian.Uint64(nonce[:]) | 1 // never 0: a server reads 0 as "no timestamp"
	req := packet{Version: version, Mode: modeClient, Transmit: sent}.marshal()

	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.SetReadDeadline(deadline); err != nil {
		return Sample{}, err
	}
	if ctx.Err() != nil {
		return Sample{}, ctx.Err()
	}
	t1 := time.Now()
	if _, err := conn.WriteToUDPAddrPort(req, addr); err != nil {
		return Sample{}, fmt.Errorf("sending NTP request: %w", err)
	}
	buf := make([]byte, 1024)
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		t4 := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return Sample{}, ctx.Err()
			}
			return Sample{}, fmt.Errorf("waiting for the NTP reply: %w", err)
		}
		// Zones are left out: the kernel names the one of a link-local
		// source by interface, the user may have given its index.
		if from.Addr().Unmap().WithZone("") != addr.Addr().WithZone("") || from.Port() != addr.Port() {
			continue // someone else's packet
		}
		p, err := parsePacket(buf[:n])
		if err != nil {
			continue // garbage is no answer; wait on for the real one
		}
		if err := p.validate(sent); err != nil {
			if errors.Is(err, errNotOurs) {
				continue
			}
			return Sample{}, err
		}
		t2, t3 := ntpTime(p.Receive), ntpTime(p.Transmit)
		// t1 and t4 carry monotonic readings, so the round trip is measured
		// even if the clock is stepped meanwhile; t2 and t3 do not, so the
		// offset compares wall clocks, as it must.
		offset := (t2.Sub(t1.Round(0)) + t3.Sub(t4.Round(0))) / 2
		delay := max(t4.Sub(t1)-t3.Sub(t2), 0)
		return Sample{Server: addr, Offset: offset, Delay: delay, Stratum: p.Stratum}, nil
	}
}

// String describes a sample for logs.
func (s Sample) String() string {
	return "server " + s.Server.String() + " offset " + s.Offset.String() + " delay " + s.Delay.String() + " stratum " + strconv.Itoa(int(s.Stratum))
}
