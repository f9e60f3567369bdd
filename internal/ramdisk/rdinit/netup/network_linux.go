package netup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/vishvananda/netlink"

	"github.com/ironic-go/ironic-agent/internal/clock"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/networkdata"
)

// Network is the ramdisk's network set-up: New makes it, Up runs it.
type Network struct {
	log *slog.Logger
	cfg Config
	// spawn starts a goroutine (see Options.Go).
	spawn func(func())

	// isNIC picks the links DHCP and VLANs may use (physicalNIC; a test
	// takes veths).
	isNIC func(netlink.Link) bool
	// loadModule loads a kernel module by name before its first use (nil:
	// the kernel has what it needs).
	loadModule     func(name string) error
	vlanModuleOnce sync.Once
	bondModuleOnce sync.Once

	// data is the config drive's network_data.json: with it, the
	// network is what it says (see applyNetworkData), not DHCP on
	// every NIC.
	data *networkdata.Data

	mu        sync.Mutex
	haveRoute bool
	// resolvers are the DNS settings of every lease and RA so far, in
	// the order resolv.conf lists them; the newest of a key replaces it.
	resolvers []resolverSource
}

// Options are what PID 1 hands the network set-up beside its Config.
type Options struct {
	// Data is the config drive's network data (see LoadNetworkData): with
	// it, the network is what it says instead of DHCP on every NIC.
	Data *networkdata.Data
	// LoadModule loads a kernel module by name before its first use
	// (8021q, bonding); nil when the kernel has what it needs.
	LoadModule func(name string) error
	// Go starts f in a goroutine of its own: the DHCP, router
	// advertisement and LLDP work, and the lease renewals, run this way.
	// PID 1 passes one that recovers a panic and reports it, since PID 1
	// dying panics the kernel; nil is a plain go statement.
	Go func(f func())
}

// New returns the network set-up cfg and opts describe; nothing is done
// before Up.
func New(log *slog.Logger, cfg Config, opts Options) *Network {
	spawn := opts.Go
	if spawn == nil {
		spawn = func(f func()) { go f() }
	}
	return &Network{log: log.With("component", "network"), cfg: cfg, spawn: spawn, isNIC: physicalNIC,
		data: opts.Data, loadModule: opts.LoadModule}
}

// physicalNIC is a NIC of the machine: a device with an Ethernet MAC.
func physicalNIC(l netlink.Link) bool {
	a := l.Attrs()
	return a.Flags&net.FlagLoopback == 0 && l.Type() == "device" && len(a.HardwareAddr) == 6
}

// Up brings every link up, creates the VLAN links ipa-enable-vlan-interfaces
// asks for, starts DHCP on the selected NICs and VLANs and returns once
// the first lease is configured (the BOOTIF NIC's or one of its VLANs',
// when BOOTIF is given), or when every attempt has failed or timed out.
// Attempts on the other links go on in the background, and every lease is
// renewed. VLANs learned from LLDP wait for their neighbour's frame (up to
// ipa-lldp-timeout) while DHCP runs on the plain NICs, and are made
// when it comes, before or after Up returns. With network data (see
// Options.Data) the network is what it says instead.
func (n *Network) Up(ctx context.Context) error {
	if n.data != nil {
		return n.applyNetworkData(ctx, n.data)
	}
	links, err := netlink.LinkList()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	n.log.Info("links", "count", len(links))
	var nics []netlink.Link
	for _, l := range links {
		a := l.Attrs()
		if n.cfg.IPv6 && n.isNIC(l) {
			// Before the link is up: the kernel solicits routers and
			// makes its SLAAC address as it comes up.
			n.enableIPv6(a.Name, true)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			n.log.Warn("link up", "link", a.Name, "error", err)
			continue
		}
		if n.isNIC(l) {
			nics = append(nics, l)
		}
	}
	for _, err := range n.cfg.VLANProblems {
		n.log.Error("VLAN parameter: entry skipped", "error", err)
	}
	var dhcpOn []netlink.Link
	for _, l := range append(slices.Clip(nics), n.explicitVLANs(n.cfg.VLANs, nics)...) {
		if n.selected(l.Attrs().HardwareAddr.String()) {
			dhcpOn = append(dhcpOn, l)
		}
	}
	parents := n.lldpParents(n.cfg.VLANs, nics)
	if len(dhcpOn) == 0 && len(parents) == 0 {
		if n.cfg.DHCP != nil && len(n.cfg.DHCP) == 0 {
			return nil
		}
		return errors.New("no NIC to run DHCP on")
	}
	return n.runDHCP(ctx, dhcpOn, parents, n.cfg.BootIF)
}

// runDHCP starts DHCPv4 and, with IPv6 on, router advertisements on each
// of links, and listens for LLDP on parents to make and configure the
// VLANs their neighbours announce. It returns once the first address is
// configured (bootIF's NIC's or one of its VLANs', when bootIF is set),
// or when every attempt has failed or timed out; the others go on in the
// background, and every lease is renewed.
func (n *Network) runDHCP(ctx context.Context, links, parents []netlink.Link, bootIF string) error {
	// The LLDP step's result has learned set, and more announces the
	// learned VLANs' attempts, which follow.
	type result struct {
		mac     string
		err     error
		learned bool
		more    int
	}
	done := make(chan result)
	stop := make(chan struct{})
	defer close(stop)
	send := func(r result) {
		select {
		case done <- r:
		case <-stop: // Up has returned; the attempt goes on alone
		}
	}
	// Each link gets a DHCPv4 attempt and, with IPv6 on, an attempt by
	// router advertisements (SLAAC, DHCPv6): whichever configures an
	// address first lets the agent start (dual stack: the other goes on).
	perLink := 1
	if n.cfg.IPv6 {
		perLink = 2
	}
	attempt := func(l netlink.Link) {
		n.spawn(func() {
			err := n.dhcp(ctx, l)
			send(result{mac: l.Attrs().HardwareAddr.String(), err: err})
		})
		if n.cfg.IPv6 {
			n.spawn(func() {
				err := n.ipv6(ctx, l)
				send(result{mac: l.Attrs().HardwareAddr.String(), err: err})
			})
		}
	}
	pending := len(links) * perLink
	for _, l := range links {
		attempt(l)
	}
	if len(parents) > 0 {
		pending++
		n.spawn(func() {
			var learned []netlink.Link
			for _, l := range n.learnedVLANs(ctx, parents) {
				if n.selected(l.Attrs().HardwareAddr.String()) {
					learned = append(learned, l)
				}
			}
			if len(learned) == 0 {
				send(result{learned: true, err: errors.New("no VLAN to run DHCP on from LLDP")})
				return
			}
			send(result{learned: true, more: len(learned) * perLink})
			for _, l := range learned {
				attempt(l)
			}
		})
	}
	// The first lease is enough to go on, the LLDP step goes on alone:
	// waiting for it would add the LLDP timeout to every boot with a
	// silent NIC, on top of the agent's own LLDP wait (ipa-collect-lldp),
	// which starts later and so ends after this one has made its VLANs.
	var errs []error
	for pending > 0 {
		r := <-done
		pending--
		if r.learned {
			pending += r.more
		}
		if r.err == nil && r.more == 0 && (bootIF == "" || r.mac == bootIF) {
			return nil
		}
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	return errors.Join(errs...)
}

func (n *Network) selected(mac string) bool {
	if n.cfg.DHCP == nil {
		return true
	}
	for _, m := range n.cfg.DHCP {
		if m == mac {
			return true
		}
	}
	return false
}

// dhcp gets a lease on l, configures it, and keeps renewing it in the
// background. It returns once the first lease is configured or failed;
// after a failure it goes on trying in the background every
// cfg.DHCPRetry, as dhclient does after its timeout in IPA's images: a
// DHCP server that comes late (a second network, a switch port still in
// spanning-tree learning) still gives the NIC its address, which
// ipa-inspection-dhcp-all-interfaces waits for and a lookup can use.
func (n *Network) dhcp(ctx context.Context, l netlink.Link) error {
	err := n.dhcpWindow(ctx, l)
	if err != nil && n.cfg.DHCPRetry > 0 && ctx.Err() == nil {
		name := l.Attrs().Name
		n.log.Info(EventDHCPRetrying, "link", name, "pause", n.cfg.DHCPRetry)
		n.spawn(func() {
			for clock.Sleep(ctx, n.cfg.DHCPRetry) == nil {
				if n.dhcpWindow(ctx, l) == nil {
					return
				}
			}
		})
	}
	return err
}

// dhcpWindow is one attempt at a lease on l, for up to cfg.DHCPTimeout;
// a lease is configured and renewed in the background.
func (n *Network) dhcpWindow(ctx context.Context, l netlink.Link) error {
	name := l.Attrs().Name
	opts := []nclient4.ClientOpt{nclient4.WithTimeout(2 * time.Second), nclient4.WithRetry(1 << 20)}
	if n.cfg.Debug {
		opts = append(opts, nclient4.WithSummaryLogger())
	}
	// A DISCOVER sent before the link has carrier is lost, and the
	// client's retry comes 2 s later: start the moment the link is up
	// (virtio at once, a real NIC after autonegotiation, often seconds).
	t0 := time.Now()
	up := waitCarrier(ctx, "/sys/class/net/"+name+"/carrier", carrierWait)
	n.log.Info(EventDHCPStart, "link", name, "carrier", up, "carrier_seconds", logging.Seconds(time.Since(t0)))
	c, err := nclient4.New(name, opts...)
	if err != nil {
		return fmt.Errorf("dhcp on %s: %w", name, err)
	}
	n.log.Info("DHCP client open", "link", name)
	rctx, cancel := context.WithTimeout(ctx, n.cfg.DHCPTimeout)
	t := time.Now()
	if n.cfg.Debug {
		// Where a DHCP attempt hangs is otherwise invisible on a console.
		stop := time.AfterFunc(15*time.Second, func() {
			buf := make([]byte, 1<<20)
			n.log.Info("DHCP still waiting", "link", name, "goroutines", string(buf[:runtime.Stack(buf, true)]))
		})
		defer stop.Stop()
	}
	lease, err := c.Request(rctx, askFor())
	cancel()
	if err != nil {
		c.Close()
		n.log.Info("no DHCP lease", "link", name, "seconds", logging.Seconds(time.Since(t)), "error", err)
		return fmt.Errorf("dhcp on %s: %w", name, err)
	}
	if err := n.apply(l, lease.ACK); err != nil {
		c.Close()
		return fmt.Errorf("dhcp on %s: %w", name, err)
	}
	n.log.Info(EventDHCPLease, "link", name, "address", lease.ACK.YourIPAddr, "server", lease.ACK.ServerIdentifier(),
		"router", lease.ACK.Router(), "seconds", logging.Seconds(time.Since(t)), "uptime", logging.Uptime())
	n.spawn(func() { n.renew(ctx, c, l, lease) })
	return nil
}

// renew keeps the lease alive at T1 for as long as the machine runs; a
// failed renewal is retried every 30 s while the address stays configured.
func (n *Network) renew(ctx context.Context, c *nclient4.Client, l netlink.Link, lease *nclient4.Lease) {
	defer c.Close()
	name := l.Attrs().Name
	for {
		lt := lease.ACK.IPAddressLeaseTime(time.Hour)
		wait := lease.ACK.IPAddressRenewalTime(lt / 2)
		if clock.Sleep(ctx, wait) != nil {
			return
		}
		for {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			nl, err := c.Renew(rctx, lease, askFor())
			cancel()
			if err == nil {
				lease = nl
				if err := n.apply(l, lease.ACK); err != nil {
					n.log.Warn("DHCP renew", "link", name, "error", err)
				} else {
					n.log.Info("DHCP renewed", "link", name, "address", lease.ACK.YourIPAddr,
						"lease_seconds", lease.ACK.IPAddressLeaseTime(0).Seconds())
				}
				break
			}
			n.log.Warn("DHCP renew", "link", name, "error", err)
			if clock.Sleep(ctx, 30*time.Second) != nil {
				return
			}
		}
	}
}

func (n *Network) apply(l netlink.Link, ack *dhcpv4.DHCPv4) error {
	mask := ack.SubnetMask()
	if mask == nil {
		mask = ack.YourIPAddr.DefaultMask()
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: ack.YourIPAddr.To4(), Mask: mask}}
	if err := netlink.AddrReplace(l, addr); err != nil {
		return fmt.Errorf("add address %s: %w", addr.IPNet, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	// One default route, from the first lease: several NICs on one
	// machine usually share a router, and a second default route would
	// only fight with the first.
	if r := ack.Router(); len(r) > 0 && !n.haveRoute {
		route := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: r[0]}
		if err := netlink.RouteReplace(route); err != nil {
			return fmt.Errorf("default route via %s: %w", r[0], err)
		}
		n.haveRoute = true
		if err := n.setResolverLocked(v4Resolver(ack)); err != nil {
			return err
		}
	}
	if h := ack.HostName(); h != "" && n.cfg.HostnameFile != "" {
		if err := os.WriteFile(n.cfg.HostnameFile, []byte(h), 0o644); err != nil {
			// A name that does not fit the kernel's 64 bytes is refused;
			// the address is configured all the same.
			n.log.Warn("host name from DHCP", "name", h, "file", n.cfg.HostnameFile, "error", err)
		}
	}
	return nil
}

// askFor adds what apply uses beyond the client's defaults (netmask,
// router, domain name, DNS servers), as dhclient asks: a server sends only
// the options a client requests.
func askFor() dhcpv4.Modifier {
	return dhcpv4.WithRequestedOptions(dhcpv4.OptionHostName, dhcpv4.OptionDNSDomainSearchList)
}

func v4Resolver(ack *dhcpv4.DHCPv4) resolverSource {
	s := resolverSource{Key: "dhcp4"}
	if d := ack.DomainSearch(); d != nil && len(d.Labels) > 0 {
		s.Search = d.Labels
	} else if d := ack.DomainName(); d != "" {
		s.Search = []string{d}
	}
	for _, ip := range ack.DNS() {
		s.Servers = append(s.Servers, ip.String())
	}
	return s
}

// setResolver records one source's DNS settings and rewrites resolv.conf
// with all of them; a failure is logged (the address stays configured).
func (n *Network) setResolver(s resolverSource) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.setResolverLocked(s); err != nil {
		n.log.Warn("resolv.conf", "error", err)
	}
}

func (n *Network) setResolverLocked(s resolverSource) error {
	i := slices.IndexFunc(n.resolvers, func(r resolverSource) bool { return r.Key == s.Key })
	if i >= 0 {
		if slices.Equal(n.resolvers[i].Servers, s.Servers) && slices.Equal(n.resolvers[i].Search, s.Search) {
			return nil
		}
		n.resolvers[i] = s
	} else {
		n.resolvers = append(n.resolvers, s)
	}
	// DHCPv4 first, as before IPv6: then the other sources by arrival.
	slices.SortStableFunc(n.resolvers, func(a, b resolverSource) int {
		return boolCmp(b.Key == "dhcp4", a.Key == "dhcp4")
	})
	if n.cfg.ResolvConf == "" {
		return nil
	}
	text := resolvConf(n.resolvers)
	if err := os.WriteFile(n.cfg.ResolvConf, []byte(text), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", n.cfg.ResolvConf, err)
	}
	n.log.Info(EventResolvConfWritten, "file", n.cfg.ResolvConf, "from", s.Key,
		"content", strings.ReplaceAll(strings.TrimSpace(text[strings.IndexByte(text, '\n')+1:]), "\n", "; "))
	return nil
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// carrierWait bounds the wait for a link's carrier: past it DHCP starts
// anyway (a driver that never reports carrier still gets its chance).
const carrierWait = 10 * time.Second

// waitCarrier polls a link's carrier file until it reads 1 or limit passes
// (reading it fails while the link is administratively down, and polling a
// sysfs file is cheaper here than a netlink subscription per NIC).
func waitCarrier(ctx context.Context, path string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == "1" {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		if clock.Sleep(ctx, 20*time.Millisecond) != nil {
			return false
		}
	}
}
