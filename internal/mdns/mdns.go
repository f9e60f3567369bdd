// Package mdns finds an OpenStack service's endpoint by multicast DNS, as
// IPA's mdns.get_endpoint does: Ironic's conductor ([conductor]enable_mdns)
// publishes "baremetal._openstack._tcp.local." with the API's address and
// port in an SRV record and its path, protocol and extra parameters in a
// TXT record (RFC 6763 as the OpenStack API SIG's guideline applies it).
//
// The query goes out from an ephemeral port on every multicast interface
// (a "legacy unicast" query, RFC 6762 section 6.7): responders answer it
// straight to that port, so the agent needs no listener on port 5353 and
// shares it with nothing.
package mdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/net/ipv4"

	"github.com/ironic-go/ironic-agent/internal/clock"
	"github.com/ironic-go/ironic-agent/internal/logging"
)

// Domain is where OpenStack services publish themselves.
const Domain = "_openstack._tcp.local."

// Port is mDNS's port, and these its IPv4 and IPv6 groups.
const Port = 5353

var (
	group4 = netip.MustParseAddr("224.0.0.251")
	group6 = netip.MustParseAddr("ff02::fb")
)

// Endpoint is a service found by mDNS.
type Endpoint struct {
	// URL is the endpoint as IPA builds it: protocol://host:port/path.
	URL string
	// Params are the TXT record's other keys (IPA's properties), such as
	// ipa_debug or ipa_ntp_server.
	Params map[string]string
	// Server is the SRV record's target, Port its port, Addresses the
	// target's addresses as answered.
	Server    string
	Port      uint16
	Addresses []netip.Addr
}

// Options tune a Lookup.
type Options struct {
	// Interfaces are the IP addresses of the interfaces to query on
	// (IPA's [mdns]interfaces); empty: every interface that is up and
	// multicast-capable.
	Interfaces []string
	// Attempts is IPA's [mdns]lookup_attempts (at least 1; 0 gives 3).
	Attempts int
	// Wait is how long an attempt listens for answers (0 gives 3 s,
	// python-zeroconf's get_service_info timeout).
	Wait time.Duration
	Log  *slog.Logger
}

// NotFoundError is a lookup that got no usable answer.
type NotFoundError struct {
	Service  string
	Attempts int
	Queried  []string // the interfaces asked
	Detail   string   // what was missing, when something answered
}

func (e *NotFoundError) Error() string {
	msg := fmt.Sprintf("mDNS: no answer for %s.%s after %d attempt(s) on %s", e.Service, Domain, e.Attempts, strings.Join(e.Queried, ", "))
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg + " (is the conductor's [conductor]enable_mdns on, and the network the same multicast domain?)"
}

// Lookup asks for service's endpoint ("baremetal", or
// "baremetal-introspection" for an inspection callback), retrying as IPA
// does (a wait that doubles from 0.1 s between attempts).
func Lookup(ctx context.Context, service string, opts Options) (Endpoint, error) {
	log := logging.OrDiscard(opts.Log)
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	if opts.Wait <= 0 {
		opts.Wait = 3 * time.Second
	}
	name := service + "." + Domain
	ifaces, err := interfaces(opts.Interfaces)
	if err != nil {
		return Endpoint{}, err
	}
	var asked []string
	for _, ifi := range ifaces {
		asked = append(asked, ifi.Name)
	}
	delay := 100 * time.Millisecond
	var detail string
	for attempt := 1; ; attempt++ {
		rec, err := query(ctx, ifaces, name, opts.Wait, log)
		if err != nil {
			return Endpoint{}, err
		}
		if ep, err := rec.endpoint(name, log); err == nil {
			return ep, nil
		} else {
			detail = err.Error()
		}
		if attempt >= opts.Attempts {
			return Endpoint{}, &NotFoundError{Service: service, Attempts: attempt, Queried: asked, Detail: detail}
		}
		if clock.Sleep(ctx, delay) != nil {
			return Endpoint{}, ctx.Err()
		}
		delay *= 2
	}
}

// interfaces returns the interfaces to query on: those holding one of
// addrs, or every up, multicast-capable, non-loopback one.
func interfaces(addrs []string) ([]net.Interface, error) {
	all, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("mDNS: listing interfaces: %w", err)
	}
	var out []net.Interface
	if len(addrs) > 0 {
		for _, a := range addrs {
			want, err := netip.ParseAddr(a)
			if err != nil {
				return nil, fmt.Errorf("mDNS: interface address %q: %w", a, err)
			}
			found := false
			for _, ifi := range all {
				if hasAddr(ifi, want) {
					out = append(out, ifi)
					found = true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("mDNS: no interface holds the address %s ([mdns]interfaces)", a)
			}
		}
		return out, nil
	}
	for _, ifi := range all {
		if ifi.Flags&net.FlagUp != 0 && ifi.Flags&net.FlagMulticast != 0 && ifi.Flags&net.FlagLoopback == 0 {
			out = append(out, ifi)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("mDNS: no interface is up and multicast-capable")
	}
	return out, nil
}

func hasAddr(ifi net.Interface, want netip.Addr) bool {
	addrs, err := ifi.Addrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == want {
			return true
		}
	}
	return false
}

// records is what the answers of one attempt held; the readers of the
// IPv4 and IPv6 sockets add to it at once.
type records struct {
	mu    sync.Mutex
	srv   map[string]dnsmessage.SRVResource // by owner name
	txt   map[string][]string
	addrs map[string][]netip.Addr // by host name
}

// query sends the question for name's SRV and TXT records on every
// interface, IPv4 and IPv6, and gathers the answers for wait.
func query(ctx context.Context, ifaces []net.Interface, name string, wait time.Duration, log *slog.Logger) (*records, error) {
	msg, err := question(name)
	if err != nil {
		return nil, err
	}
	rec := &records{srv: map[string]dnsmessage.SRVResource{}, txt: map[string][]string{}, addrs: map[string][]netip.Addr{}}
	var conns []net.PacketConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	sent := 0
	if c4, err := net.ListenUDP("udp4", &net.UDPAddr{}); err == nil {
		conns = append(conns, c4)
		p := ipv4.NewPacketConn(c4)
		for _, ifi := range ifaces {
			if err := p.SetMulticastInterface(&ifi); err != nil {
				log.Debug("mDNS: no IPv4 multicast on interface", "interface", ifi.Name, "error", err)
				continue
			}
			if _, err := c4.WriteTo(msg, &net.UDPAddr{IP: group4.AsSlice(), Port: Port}); err != nil {
				log.Debug("mDNS: IPv4 query not sent", "interface", ifi.Name, "error", err)
				continue
			}
			sent++
		}
	}
	if c6, err := net.ListenUDP("udp6", &net.UDPAddr{}); err == nil {
		conns = append(conns, c6)
		for _, ifi := range ifaces {
			if _, err := c6.WriteTo(msg, &net.UDPAddr{IP: group6.AsSlice(), Port: Port, Zone: ifi.Name}); err != nil {
				log.Debug("mDNS: IPv6 query not sent", "interface", ifi.Name, "error", err)
				continue
			}
			sent++
		}
	}
	if sent == 0 {
		return nil, fmt.Errorf("mDNS: the query for %s could be sent on no interface (IPv4 or IPv6)", name)
	}
	deadline := time.Now().Add(wait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	done := make(chan struct{})
	for _, c := range conns {
		go func(c net.PacketConn) {
			defer func() { done <- struct{}{} }()
			_ = c.SetReadDeadline(deadline)
			buf := make([]byte, 9000)
			for {
				n, from, err := c.ReadFrom(buf)
				if err != nil {
					return
				}
				rec.add(buf[:n], from, log)
				if rec.complete(name) {
					// Every reader stops at once: the deadline is now.
					for _, o := range conns {
						_ = o.SetReadDeadline(time.Now())
					}
					return
				}
			}
		}(c)
	}
	// ctx's end also ends the reads.
	stop := context.AfterFunc(ctx, func() {
		for _, c := range conns {
			_ = c.SetReadDeadline(time.Now())
		}
	})
	defer stop()
	for range conns {
		<-done
	}
	return rec, ctx.Err()
}

// question is a query for name's SRV and TXT records, asking for unicast
// answers (the QU bit).
func question(name string) ([]byte, error) {
	n, err := dnsmessage.NewName(name)
	if err != nil {
		return nil, fmt.Errorf("mDNS: service name %q: %w", name, err)
	}
	const qu = dnsmessage.Class(1 << 15)
	m := dnsmessage.Message{Questions: []dnsmessage.Question{
		{Name: n, Type: dnsmessage.TypeSRV, Class: dnsmessage.ClassINET | qu},
		{Name: n, Type: dnsmessage.TypeTXT, Class: dnsmessage.ClassINET | qu},
	}}
	return m.Pack()
}

// add records what one answer holds. The records of several answers
// (several interfaces, a responder that splits them) are merged; a
// message that does not parse is skipped.
func (r *records) add(b []byte, from net.Addr, log *slog.Logger) {
	var p dnsmessage.Parser
	h, err := p.Start(b)
	if err != nil || !h.Response {
		return
	}
	if err := p.SkipAllQuestions(); err != nil {
		log.Debug("mDNS: unparsable answer", "from", from.String(), "error", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Answers, then (skipping the authorities) the additional records,
	// where responders put the SRV target's addresses.
	for section := 0; section < 2; section++ {
		for {
			var rh dnsmessage.ResourceHeader
			if section == 0 {
				rh, err = p.AnswerHeader()
			} else {
				rh, err = p.AdditionalHeader()
			}
			if errors.Is(err, dnsmessage.ErrSectionDone) {
				break
			}
			skip := p.SkipAnswer
			if section == 1 {
				skip = p.SkipAdditional
			}
			if err != nil || !r.resource(&p, rh, skip) {
				log.Debug("mDNS: unparsable answer", "from", from.String(), "error", err)
				return
			}
		}
		if section == 0 && p.SkipAllAuthorities() != nil {
			return
		}
	}
}

// resource reads one record whose header is rh (skip passes over one of
// its section); false: the message broke.
func (r *records) resource(p *dnsmessage.Parser, rh dnsmessage.ResourceHeader, skip func() error) bool {
	owner := strings.ToLower(rh.Name.String())
	switch rh.Type {
	case dnsmessage.TypeSRV:
		srv, err := p.SRVResource()
		if err != nil {
			return false
		}
		r.srv[owner] = srv
	case dnsmessage.TypeTXT:
		txt, err := p.TXTResource()
		if err != nil {
			return false
		}
		r.txt[owner] = txt.TXT
	case dnsmessage.TypeA:
		a, err := p.AResource()
		if err != nil {
			return false
		}
		r.addAddr(owner, netip.AddrFrom4(a.A))
	case dnsmessage.TypeAAAA:
		a, err := p.AAAAResource()
		if err != nil {
			return false
		}
		r.addAddr(owner, netip.AddrFrom16(a.AAAA))
	default:
		if skip() != nil {
			return false
		}
	}
	return true
}

func (r *records) addAddr(host string, a netip.Addr) {
	for _, have := range r.addrs[host] {
		if have == a {
			return
		}
	}
	r.addrs[host] = append(r.addrs[host], a)
}

// complete says whether the records hold name's SRV, its TXT and an
// address of the SRV's target.
func (r *records) complete(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	name = strings.ToLower(name)
	srv, ok := r.srv[name]
	if !ok {
		return false
	}
	_, ok = r.txt[name]
	return ok && len(r.addrs[strings.ToLower(srv.Target.String())]) > 0
}

// endpoint builds the endpoint from the records as IPA's get_endpoint
// does, or says what is missing.
func (r *records) endpoint(name string, log *slog.Logger) (Endpoint, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := strings.ToLower(name)
	srv, ok := r.srv[key]
	if !ok {
		return Endpoint{}, errors.New("no SRV record answered")
	}
	target := srv.Target.String()
	addrs := r.addrs[strings.ToLower(target)]
	if len(addrs) == 0 {
		return Endpoint{}, fmt.Errorf("no address answered for the SRV record's host %s", target)
	}
	params, err := properties(r.txt[key])
	if err != nil {
		return Endpoint{}, err
	}
	ep := Endpoint{Server: target, Port: srv.Port, Addresses: addrs, Params: params}
	address, err := pickAddress(addrs, srv.Port, log)
	if err != nil {
		return Endpoint{}, err
	}
	path := params["path"]
	protocol := params["protocol"]
	delete(params, "path")
	delete(params, "protocol")
	if protocol == "" {
		protocol = "https"
		if srv.Port == 80 {
			protocol = "http"
		}
	}
	// A .local. server: the catalog held an IP address, so the address
	// is the host; otherwise the server's name is.
	host := strings.TrimSuffix(target, ".")
	if strings.HasSuffix(target, ".local.") {
		host = address.String()
		if address.Is6() {
			host = "[" + host + "]"
		}
	}
	ep.URL = protocol + "://" + host + ":" + strconv.Itoa(int(srv.Port)) + path
	return ep, nil
}

// properties decodes TXT strings key=value (a key alone has the value "").
// A key that is not UTF-8 makes the record unusable, as in IPA.
func properties(txt []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range txt {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if !utf8.ValidString(k) {
			return nil, fmt.Errorf("TXT record key %q is not UTF-8", k)
		}
		out[k] = v
	}
	return out, nil
}

// pickAddress is IPA's choice: the first address that is not loopback and
// that this machine has a route to, else the first one that is not
// loopback (logged).
func pickAddress(addrs []netip.Addr, port uint16, log *slog.Logger) (netip.Addr, error) {
	var fallback netip.Addr
	for _, a := range addrs {
		if a.IsLoopback() {
			continue
		}
		if routable(a, port) {
			return a, nil
		}
		if !fallback.IsValid() {
			fallback = a
		}
	}
	if !fallback.IsValid() {
		return netip.Addr{}, fmt.Errorf("none of the addresses %v is usable (all loopback)", addrs)
	}
	log.Warn("mDNS: none of the service's addresses seems routable; using the first", "addresses", fmt.Sprint(addrs), "using", fallback.String())
	return fallback, nil
}

// routable says whether the kernel has a route to a: a UDP "connect"
// sends nothing and fails without one.
func routable(a netip.Addr, port uint16) bool {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, port)))
	if err != nil {
		return false
	}
	c.Close()
	return true
}
