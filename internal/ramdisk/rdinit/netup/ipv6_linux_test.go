package netup

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/vishvananda/netlink"
)

// TestIPv6Helper is the client side of TestIPv6InNetns, run by it in the
// client's network namespace: the init's network start-up (DHCPv4 and
// IPv6 together) on the named link, then a wait, then the link's IPv6
// addresses.
func TestIPv6Helper(t *testing.T) {
	spec := os.Getenv("RDINIT_IPV6_HELPER")
	if spec == "" {
		t.Skip("helper process of TestIPv6InNetns")
	}
	name, rest, _ := strings.Cut(spec, ",")
	hold, dir, _ := strings.Cut(rest, ",")
	if !filepath.IsAbs(dir) {
		t.Fatalf("RDINIT_IPV6_HELPER %q: no absolute directory for resolv.conf", spec)
	}
	d, err := time.ParseDuration(hold)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	// IPv6Conf stays empty: no sysctl is written from a test, even in a
	// namespace. The files go to the test's directory.
	n := New(log, Config{DHCPTimeout: 30 * time.Second, IPv6: true, ResolvConf: filepath.Join(dir, "resolv.conf")}, Options{})
	n.isNIC = func(l netlink.Link) bool { return l.Attrs().Name == name }
	t0 := time.Now()
	if err := n.Up(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("UP after %v\n", time.Since(t0).Round(time.Millisecond))
	time.Sleep(d)
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		fmt.Printf("ADDRESS %s\n", a.IPNet)
	}
}

// TestIPv6InNetns runs Debian's dnsmasq with router advertisements in a
// network namespace and the init's network start-up in another, over a
// veth pair, for SLAAC with DNS from the RA (ra-stateless) and for
// stateful DHCPv6 (IA_NA) with DNS from DHCPv6. The server starts 3 s
// after the client, so the client's first solicitations go unanswered.
// The stateful case holds its 2-minute lease past T1 (60 s, dnsmasq's
// half of the lease) and wants it renewed; its reservation is on the
// DUID-LL, stateful-mac's on the MAC.
func TestIPv6InNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: the stateful case holds a lease past its renewal (about 70 s)")
	}
	netnstest.RequireRoot(t, "dnsmasq")
	keepHostFiles(t)
	for _, tc := range []struct {
		name, prefix string
		srvAddr      string
		hold         time.Duration
		dnsmasq      []string
		wantAddr     string
		wantDNS      string
		wantLog      []string
	}{
		{"slaac", "r6s", "fd00:77::1/64", 2 * time.Second,
			[]string{"--enable-ra", "--dhcp-range=fd00:77::,ra-stateless,64,2m", "--dhcp-option=option6:dns-server,[fd00:77::53]",
				"--dhcp-option=option6:domain-search,prov.example"},
			"ADDRESS fd00:77::5054:ff:fe77:12/64", "search prov.example\nnameserver fd00:77::53\n",
			[]string{`msg="IPv6 router advertisement"`, "other=true", "slaac=true", `msg="DHCPv6 information"`}},
		{"stateful", "r6m", "fd00:78::1/64", 65 * time.Second,
			[]string{"--enable-ra", "--dhcp-range=fd00:78::10,fd00:78::20,64,2m", "--dhcp-option=option6:dns-server,[fd00:78::53]",
				"--dhcp-host=id:00:03:00:01:52:54:00:77:00:12,[fd00:78::12]"},
			"ADDRESS fd00:78::12/128", "nameserver fd00:78::53\n",
			[]string{"managed=true", "slaac=false", `msg="DHCPv6 lease"`, `msg="DHCPv6 renewed"`}},
		// The reservation Ironic's and Metal3's dnsmasq already have for
		// DHCPv4, by MAC: dnsmasq finds the MAC of a client on its link.
		{"stateful-mac", "r6h", "fd00:76::1/64", 2 * time.Second,
			[]string{"--enable-ra", "--dhcp-range=fd00:76::10,fd00:76::20,64,2m", "--dhcp-host=52:54:00:77:00:12,[fd00:76::12]"},
			"ADDRESS fd00:76::12/128", "",
			[]string{"managed=true", `msg="DHCPv6 lease"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			srv, cli, srvIf, cliIf := serverAndClient(t, tc.prefix)
			srv.IP("-6", "addr", "add", tc.srvAddr, "dev", srvIf, "nodad")
			cli.IP("link", "set", cliIf, "address", "52:54:00:77:00:12")
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			files := t.TempDir()
			cmd := exec.CommandContext(ctx, "ip", "netns", "exec", cli.Name, os.Args[0], "-test.run=^TestIPv6Helper$", "-test.v")
			cmd.Env = append(os.Environ(), "RDINIT_IPV6_HELPER="+cliIf+","+tc.hold.String()+","+files)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second) // a server that answers late
			dlog := startDnsmasq(t, srv.Name, srvIf, tc.dnsmasq...)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("client: %v\n%s\ndnsmasq:\n%s", err, out.String(), dlog())
			}
			got := out.String()
			for _, w := range append([]string{tc.wantAddr}, tc.wantLog...) {
				if !strings.Contains(got, w) {
					t.Errorf("client output lacks %q:\n%s\ndnsmasq:\n%s", w, got, dlog())
				}
			}
			if tc.wantDNS == "" {
				// no DNS served
			} else if b, err := os.ReadFile(filepath.Join(files, "resolv.conf")); err != nil {
				t.Error(err)
			} else if !strings.Contains(string(b), tc.wantDNS) {
				t.Errorf("resolv.conf:\n%s\nwant:\n%s", b, tc.wantDNS)
			}
			for _, l := range strings.Split(got, "\n") {
				if strings.HasPrefix(l, "UP after") {
					t.Logf("%s (server started 3 s after the client); test took %v", l, time.Since(t0).Round(time.Second))
				}
			}
		})
	}
}
