package netup_test

// The helper processes of the namespace tests take the init's kernel
// command line as the ramdisk does, through rdinit's parser: an external
// test package, since rdinit imports netup.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/networkdata"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/netup"
)

// TestVLANDHCPHelper is the client side of TestVLANDHCP and
// TestVLANsAfterTheLease, run by them in the client's network namespace: the
// init's network step (up, with veths taken as NICs) with the given ipa-*
// parameters, then each named link's kind and IPv4 addresses.
func TestVLANDHCPHelper(t *testing.T) {
	spec := os.Getenv("RDINIT_VLAN_HELPER")
	if spec == "" {
		t.Skip("helper process of TestVLANDHCP")
	}
	linkNames, rest, _ := strings.Cut(spec, " ")
	dir, cmdline, _ := strings.Cut(rest, " ")
	cfg, err := rdinit.ParseConfig(rdinit.ParseCmdline(cmdline))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rdinit.ParseCmdline(cmdline)[rdinit.ParamDHCPTimeout]; !ok {
		cfg.DHCPTimeout = 30 * time.Second
	}
	if d, err := time.ParseDuration(os.Getenv("RDINIT_DHCP_RETRY")); err == nil {
		cfg.DHCPRetry = d
	}
	// The files the init writes go to the test's directory: this process
	// runs in a network namespace, which does not isolate files.
	cfg.ResolvConf, cfg.HostnameFile = filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "hostname")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := netup.New(slog.New(slog.NewTextHandler(os.Stdout, nil)), cfg.Config, netup.Options{})
	netup.VethsAsNICs(n)
	t0 := time.Now()
	if err := n.Up(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("UP %.3f s\n", time.Since(t0).Seconds())
	if d, err := time.ParseDuration(os.Getenv("RDINIT_VLAN_HOLD")); err == nil {
		// What goes on after up returned (the LLDP step) has its time.
		time.Sleep(d)
	}
	printLinks(t, linkNames)
}

// TestNetworkDataHelper is the client side of TestNetworkDataDHCPLate and
// TestNetworkDataBesideDocument, run by them in the client's network
// namespace: the init's network step with the given network_data.json
// and kernel command line (RDINIT_NETDATA_CMDLINE; veths taken as NICs),
// then, after a hold and once each link of RDINIT_NETDATA_WAIT has an
// IPv4 address (30 s at most), each link of RDINIT_NETDATA_LINK with its
// IPv4 addresses and routes.
func TestNetworkDataHelper(t *testing.T) {
	spec := os.Getenv("RDINIT_NETDATA_HELPER")
	if spec == "" {
		t.Skip("helper process of TestNetworkDataDHCPLate")
	}
	doc, rest, _ := strings.Cut(spec, ",")
	hold, dir, _ := strings.Cut(rest, ",")
	if !filepath.IsAbs(dir) {
		t.Fatalf("RDINIT_NETDATA_HELPER %q: no absolute directory for resolv.conf and the host name", spec)
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	d, err := networkdata.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	wait, err := time.ParseDuration(hold)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rdinit.ParseConfig(rdinit.ParseCmdline(os.Getenv("RDINIT_NETDATA_CMDLINE")))
	if err != nil {
		t.Fatal(err)
	}
	// The files the init writes go to the test's directory: this process
	// runs in a network namespace, which does not isolate files (nor
	// /proc/sys: no IPv6 sysctls).
	cfg.DHCPTimeout = 30 * time.Second
	cfg.ResolvConf, cfg.HostnameFile, cfg.IPv6Conf = filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "hostname"), ""
	n := netup.New(slog.New(slog.NewTextHandler(os.Stdout, nil)), cfg.Config, netup.Options{Data: d})
	netup.VethsAsNICs(n)
	t0 := time.Now()
	if err := n.Up(t.Context()); err != nil {
		// Printed, not fatal: a link this kernel cannot make (802.1Q)
		// fails alone, and the caller judges the rest.
		fmt.Printf("UPERROR %v\n", err)
	}
	fmt.Printf("UP %.3f s\n", time.Since(t0).Seconds())
	time.Sleep(wait)
	v4 := func(name string) []netlink.Addr {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return nil
		}
		addrs, _ := netlink.AddrList(l, netlink.FAMILY_V4)
		return addrs
	}
	for name := range strings.SplitSeq(os.Getenv("RDINIT_NETDATA_WAIT"), ",") {
		for deadline := time.Now().Add(30 * time.Second); name != "" && len(v4(name)) == 0 && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
	}
	printLinks(t, os.Getenv("RDINIT_NETDATA_LINK"))
}

// printLinks prints, for the helper processes' callers, each of the
// comma-separated links: MISSING, or LINK with its VLAN ID or kind, then
// its IPv4 addresses (ADDRESS) and the routes through a gateway (ROUTE).
func printLinks(t *testing.T, names string) {
	for name := range strings.SplitSeq(names, ",") {
		l, err := netlink.LinkByName(name)
		if err != nil {
			fmt.Printf("MISSING %s\n", name)
			continue
		}
		if v, ok := l.(*netlink.Vlan); ok {
			fmt.Printf("LINK %s VLAN %d\n", name, v.VlanId)
		} else {
			fmt.Printf("LINK %s %s\n", name, l.Type())
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			fmt.Printf("ADDRESS %s %s\n", name, a.IPNet)
		}
		routes, err := netlink.RouteList(l, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			if r.Gw != nil && r.Dst != nil {
				fmt.Printf("ROUTE %s via %s\n", r.Dst, r.Gw)
			}
		}
	}
}
