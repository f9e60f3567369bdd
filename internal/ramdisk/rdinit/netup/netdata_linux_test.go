package netup

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/networkdata"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
)

// TestFindConfigDrive gives findConfigDrive a block-device directory with
// images made by Debian's mkfs.vfat and xorriso's mkisofs (as Ironic and Metal3
// make config drives) standing in for the devices: the config-2 ones are
// found with their mount type, whatever the label's case; other labels,
// unreadable devices and loop devices are passed over.
func TestFindConfigDrive(t *testing.T) {
	for _, p := range []string{"mkfs.vfat", "xorriso"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: %s is not installed (dosfstools, xorriso)", p)
		}
	}
	dir := t.TempDir()
	vfat := func(name, label string) {
		p := filepath.Join(dir, "dev", name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(2 << 20)
		f.Close()
		netnstest.Run(t, "mkfs.vfat", "-n", label, p)
	}
	// iso makes a config drive as Ironic's mkisofs call does, with a
	// publisher ID when given.
	iso := func(name, label string, publisher ...string) {
		src := filepath.Join(dir, "src-"+name, "openstack", "latest")
		os.MkdirAll(src, 0o755)
		os.WriteFile(filepath.Join(src, "network_data.json"), []byte("{}"), 0o644)
		args := []string{"-as", "mkisofs", "-quiet", "-r", "-V", label, "-J", "-l"}
		if len(publisher) > 0 {
			args = append(args, "-publisher", publisher[0])
		}
		netnstest.Run(t, "xorriso", append(args, "-o", filepath.Join(dir, "dev", name), filepath.Dir(filepath.Dir(src)))...)
	}
	const pub = "6f1b3a52-0c8e-4c5e-9b1d-2f0e6c1a7d44"
	os.MkdirAll(filepath.Join(dir, "dev"), 0o755)
	os.MkdirAll(filepath.Join(dir, "sys"), 0o755)
	for _, tc := range []struct {
		name      string
		devs      map[string]func(string)
		wantDev   string
		wantType  string
		publisher string // ir_pub_id
	}{
		{"vfat upper case", map[string]func(string){"vda": func(n string) { vfat(n, "ESP") }, "vdb": func(n string) { vfat(n, "CONFIG-2") }}, "vdb", "vfat", ""},
		{"iso", map[string]func(string){"sda": func(n string) { vfat(n, "data") }, "sr0": func(n string) { iso(n, "config-2") }}, "sr0", "iso9660", ""},
		{"none", map[string]func(string){"sr1": func(n string) { iso(n, "VMEDIA_BOOT_ISO") }, "sr2": nil, "loop0": func(n string) { iso(n, "config-2") }}, "", "", ""},
		// The deployed instance's config drive, in a partition of the
		// install disk, is not the ramdisk's (a service or cleaning boot).
		{"instance partition", map[string]func(string){"sdd2": func(n string) { iso(n, "config-2") }}, "", "", ""},
		// Ironic's ISO: its publisher ID is ir_pub_id's (mkisofs writes
		// it upper case in the primary descriptor); one of another
		// publisher, or with none when ir_pub_id is given, is a
		// virtual medium of another boot.
		{"publisher", map[string]func(string){"sr0": func(n string) { iso(n, "config-2", "0000-old") }, "sr1": func(n string) { iso(n, "config-2", pub) }},
			"sr1", "iso9660", pub},
		{"no publisher wanted", map[string]func(string){"sr0": func(n string) { iso(n, "config-2", pub) }}, "", "", ""},
		{"publisher wanted", map[string]func(string){"sda": func(n string) { vfat(n, "CONFIG-2") }, "sr0": func(n string) { iso(n, "config-2") }}, "", "", pub},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys, dev := filepath.Join(dir, "sys", tc.name), filepath.Join(dir, "dev")
			os.MkdirAll(sys, 0o755)
			for name, mk := range tc.devs {
				os.MkdirAll(filepath.Join(sys, name), 0o755)
				if mk != nil {
					mk(name)
				}
				if strings.HasPrefix(tc.name, "instance") {
					os.WriteFile(filepath.Join(sys, name, "partition"), []byte("2\n"), 0o644)
				}
			}
			gotDev, gotType := findConfigDrive(sys, dev, tc.publisher)
			want := ""
			if tc.wantDev != "" {
				want = filepath.Join(dev, tc.wantDev)
			}
			if gotDev != want || gotType != tc.wantType {
				t.Errorf("found %q (%q), want %q (%q)", gotDev, gotType, want, tc.wantType)
			}
		})
	}
}

// TestApplyNetworkDataInNetns applies a document to veths in a network
// namespace with the init's own code: the NIC found by its MAC gets its
// static IPv4 and IPv6 addresses, the gateways' default routes and the
// extra route, resolv.conf (in the test's directory) the DNS servers of
// the document and of the network; a bond (this host's kernel has no
// bonding: the error must say so, naming the link) and a NIC that is not
// there fail alone, and the error names each.
func TestApplyNetworkDataInNetns(t *testing.T) {
	netnstest.RequireRoot(t)
	id := netnstest.ID(t)
	host := netnstest.NewNetns(t, "rdndh-"+id)
	peer := netnstest.NewNetns(t, "rdndp-"+id)
	nic, other := "rnd"+id, "rne"+id
	host.Veth(nic, peer, "rnp"+id)
	host.Veth(other, peer, "rnq"+id)
	host.IP("link", "set", nic, "address", "02:00:00:91:00:02")
	host.IP("link", "set", other, "address", "02:00:00:91:00:03")
	peer.IP("addr", "add", "10.91.0.1/24", "dev", "rnp"+id)

	doc := `{"links": [
	  {"id": "prov", "type": "phy", "ethernet_mac_address": "02:00:00:91:00:02", "mtu": 1400},
	  {"id": "gone", "type": "phy", "ethernet_mac_address": "02:00:00:91:00:99"},
	  {"id": "spare", "type": "phy", "ethernet_mac_address": "02:00:00:91:00:03"},
	  {"id": "b", "type": "bond", "bond_links": ["spare"], "bond_mode": "active-backup"}],
	 "networks": [
	  {"id": "v4", "type": "ipv4", "link": "prov", "ip_address": "10.91.0.2", "netmask": "255.255.255.0", "gateway": "10.91.0.1",
	   "routes": [{"network": "10.92.0.0", "netmask": "16", "gateway": "10.91.0.254"}]},
	  {"id": "v6", "type": "ipv6", "link": "prov", "ip_address": "fd00:91::2/64",
	   "routes": [{"network": "::", "netmask": "::", "gateway": "fd00:91::1"}], "services": [{"type": "dns", "address": "fd00:91::53"}]},
	  {"id": "lost", "type": "ipv4", "link": "gone", "ip_address": "10.93.0.2/24"}],
	 "services": [{"type": "dns", "address": "10.91.0.53"}]}`
	d, err := networkdata.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var buf strings.Builder
	n := New(slog.New(slog.NewTextHandler(&buf, nil)), Config{ResolvConf: filepath.Join(dir, "resolv.conf")}, Options{})
	n.isNIC = func(l netlink.Link) bool { return l.Type() == "veth" }
	var applyErr error
	var addrs []string
	var routes []string
	var mtu int
	if err := netnstest.Do(host.Name, func() error {
		applyErr = n.applyNetworkData(t.Context(), d)
		l, err := netlink.LinkByName(nic)
		if err != nil {
			return err
		}
		mtu = l.Attrs().MTU
		as, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, a := range as {
			if !a.IP.IsLinkLocalUnicast() {
				addrs = append(addrs, a.IPNet.String())
			}
		}
		rs, err := netlink.RouteList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Gw != nil {
				dst := "default"
				if r.Dst != nil && !r.Dst.IP.IsUnspecified() {
					dst = r.Dst.String()
				}
				routes = append(routes, dst+" via "+r.Gw.String())
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", buf.String())
	slices.Sort(addrs)
	slices.Sort(routes)
	if want := []string{"10.91.0.2/24", "fd00:91::2/64"}; !slices.Equal(addrs, want) {
		t.Errorf("addresses %v, want %v", addrs, want)
	}
	if want := []string{"10.92.0.0/16 via 10.91.0.254", "default via 10.91.0.1", "default via fd00:91::1"}; !slices.Equal(routes, want) {
		t.Errorf("routes %v, want %v", routes, want)
	}
	if mtu != 1400 {
		t.Errorf("MTU %d, want 1400", mtu)
	}
	rc, _ := os.ReadFile(filepath.Join(dir, "resolv.conf"))
	if !strings.Contains(string(rc), "nameserver 10.91.0.53\nnameserver fd00:91::53\n") {
		t.Errorf("resolv.conf:\n%s", rc)
	}
	for _, want := range []string{`link "gone": no NIC has MAC 02:00:00:91:00:99`, `network "lost": its link "gone" was not made`, `link "b": `} {
		if applyErr == nil || !strings.Contains(applyErr.Error(), want) {
			t.Errorf("error %v, want it to say %q", applyErr, want)
		}
	}
	if _, err := os.Stat("/sys/module/bonding"); err != nil && !strings.Contains(fmt.Sprint(applyErr), "the kernel has no bonding") {
		t.Errorf("error %v: want it to say the kernel has no bonding", applyErr)
	}
	// The peer reaches the static address: a listener there, in the
	// host namespace, takes a connection from the peer's.
	var ln net.Listener
	if err := netnstest.Do(host.Name, func() (err error) { ln, err = net.Listen("tcp", "10.91.0.2:0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := netnstest.Do(peer.Name, func() error {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}); err != nil {
		t.Errorf("the peer cannot reach the static address: %v", err)
	}
}

// runNetworkDataHelper runs TestNetworkDataHelper in namespace cli with the
// document, kernel command line, links to wait for and to report, and
// returns its output.
func runNetworkDataHelper(t *testing.T, cli *netnstest.Netns, doc, cmdline, wait, links string) string {
	t.Helper()
	files := t.TempDir()
	path := filepath.Join(files, "network_data.json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", cli.Name, os.Args[0], "-test.run=^TestNetworkDataHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "RDINIT_NETDATA_HELPER="+path+",0s,"+files, "RDINIT_NETDATA_CMDLINE="+cmdline,
		"RDINIT_NETDATA_WAIT="+wait, "RDINIT_NETDATA_LINK="+links)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	return string(out)
}

// TestNetworkDataDHCPLate: network data asking for DHCPv4 on a NIC (found
// by MAC) whose DHCP server, dnsmasq in another namespace, starts 4 s
// after the init: the init waits for it and takes the lease; then, 2 s
// later, the server's end of the link goes down for 3 s (the client sees
// its carrier drop, as with a cable pulled) over the first renewal (T1 =
// 4 s), and renewals go on after it with the address kept. The
// network's route is added once the lease is there. resolv.conf has the
// document's DNS server and the lease's.
func TestNetworkDataDHCPLate(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: holds a lease through a link flap (about 20 s)")
	}
	netnstest.RequireRoot(t, "dnsmasq")
	keepHostFiles(t)
	srv, cli, srvIf, cliIf := serverAndClient(t, "rnl")
	srv.IP("addr", "add", "10.79.0.1/24", "dev", srvIf)
	cli.IP("link", "set", cliIf, "address", "52:54:00:79:00:02")
	files := t.TempDir()
	doc := filepath.Join(files, "network_data.json")
	if err := os.WriteFile(doc, []byte(`{"links": [{"id": "prov", "type": "phy", "ethernet_mac_address": "52:54:00:79:00:02"}],
	  "networks": [{"id": "dhcp", "type": "ipv4_dhcp", "link": "prov",
	    "routes": [{"network": "10.80.0.0", "netmask": "255.255.0.0", "gateway": "10.79.0.254"}]}], "services": [{"type": "dns", "address": "10.79.0.53"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", cli.Name, os.Args[0], "-test.run=^TestNetworkDataHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "RDINIT_NETDATA_HELPER="+doc+",16s,"+files, "RDINIT_NETDATA_LINK="+cliIf)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	leased := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), `msg="DHCP lease"`) {
				close(leased)
			}
		}
	}()
	time.Sleep(4 * time.Second)
	dlog := startDnsmasq(t, srv.Name, srvIf, "--dhcp-range=10.79.0.50,10.79.0.60,2m", "--dhcp-option=option:T1,4",
		"--dhcp-option=option:T2,7", "--dhcp-option=option:router,10.79.0.1", "--dhcp-option=option:dns-server,10.79.0.1", "--no-ping")
	select {
	case <-leased:
	case <-time.After(40 * time.Second):
	}
	// The flap spans the first renewal (T1 = 4 s after the lease).
	time.Sleep(2 * time.Second)
	srv.IP("link", "set", srvIf, "down")
	time.Sleep(3 * time.Second)
	srv.IP("link", "set", srvIf, "up")
	err := cmd.Wait()
	pw.Close()
	<-copied
	o := out.String()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, o)
	}
	var up float64
	if i := strings.Index(o, "UP "); i >= 0 {
		fmt.Sscanf(o[i:], "UP %f", &up)
	}
	renewed := strings.Count(o, `msg="DHCP renewed"`)
	var lines []string
	for l := range strings.Lines(o) {
		if strings.Contains(l, "DHCP") || strings.Contains(l, "network data") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	t.Logf("first lease after %.1f s (server started at 4 s); %d renewals\n%s\ndnsmasq:\n%s", up, renewed, strings.Join(lines, "\n"), dlog())
	if up < 4 || up > 20 {
		t.Errorf("up returned after %.1f s, want after the late server's lease:\n%s", up, o)
	}
	if renewed < 2 || !strings.Contains(o, "ADDRESS "+cliIf+" 10.79.0.") || !strings.Contains(o, "ROUTE 10.80.0.0/16 via 10.79.0.254") {
		t.Errorf("want renewals through the flap and the address kept:\n%s\ndnsmasq:\n%s", o, dlog())
	}
	if b, err := os.ReadFile(filepath.Join(files, "resolv.conf")); err != nil || !strings.Contains(string(b), "nameserver 10.79.0.53") || !strings.Contains(string(b), "nameserver 10.79.0.1") {
		t.Errorf("resolv.conf %q, %v: want the document's server and the lease's", b, err)
	}
}

// TestNetworkDataBesideDocument runs the init's network step with a
// document that names one NIC (static IPv4, and VLAN 200 on it with a
// static address) on a client namespace with two more NICs, each facing
// dnsmasq in the server namespace, with the kernel parameters an IPA
// image combines with network data:
//
//   - none: the unnamed NICs stay without an address and no DHCP runs;
//   - ironic_agent.dhcp=MAC: DHCP on that unnamed NIC only (glean's
//     fallback, narrowed), none on the named one;
//   - ironic_agent.dhcp=all with ipa-enable-vlan-interfaces=NIC.100,NIC.200:
//     DHCP on both unnamed NICs; VLAN 100 made beside the document (on
//     this kernel without 802.1Q, tried and reported, as IPA does), VLAN
//     200 the document's, left alone.
//
// In each the static network is there when up returns, without waiting
// for any lease.
func TestNetworkDataBesideDocument(t *testing.T) {
	netnstest.RequireRoot(t, "dnsmasq")
	keepHostFiles(t)
	id := netnstest.ID(t)
	srv := netnstest.NewNetns(t, "rdnbs-"+id)
	cli := netnstest.NewNetns(t, "rdnbc-"+id)
	named, dhcpA, dhcpB := "rbn"+id, "rba"+id, "rbb"+id
	srv.Veth("rsn"+id, cli, named)
	srv.Veth("rsa"+id, cli, dhcpA)
	srv.Veth("rsb"+id, cli, dhcpB)
	for i, l := range []string{named, dhcpA, dhcpB} {
		cli.IP("link", "set", l, "address", fmt.Sprintf("52:54:00:88:00:0%d", i+1))
	}
	srv.IP("addr", "add", "10.88.0.1/24", "dev", "rsn"+id)
	srv.IP("addr", "add", "10.89.0.1/24", "dev", "rsa"+id)
	srv.IP("addr", "add", "10.90.0.1/24", "dev", "rsb"+id)
	dlog := startDnsmasq(t, srv.Name, "rsa"+id, "--interface=rsb"+id, "--no-ping",
		"--dhcp-range=10.89.0.50,10.89.0.60,2m", "--dhcp-range=10.90.0.50,10.90.0.60,2m")
	doc := `{"links": [{"id": "prov", "type": "phy", "ethernet_mac_address": "52:54:00:88:00:01"},
	    {"id": "v200", "type": "vlan", "vlan_link": "prov", "vlan_id": 200}],
	  "networks": [{"id": "s", "type": "ipv4", "link": "prov", "ip_address": "10.88.0.2/24"},
	    {"id": "s200", "type": "ipv4", "link": "v200", "ip_address": "10.88.200.2/24"}]}`
	links := strings.Join([]string{named, dhcpA, dhcpB, named + ".100", named + ".200"}, ",")
	for _, tc := range []struct {
		name, cmdline, wait string
		leased              []string
	}{
		{"none", "ironic_agent.ipv6=0", "", nil},
		{"mac", "ironic_agent.ipv6=0 ironic_agent.dhcp=52:54:00:88:00:03", dhcpB, []string{dhcpB}},
		{"all-vlans", "ironic_agent.ipv6=0 ironic_agent.dhcp=all ipa-enable-vlan-interfaces=" + named + ".100," + named + ".200",
			dhcpA + "," + dhcpB, []string{dhcpA, dhcpB}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runNetworkDataHelper(t, cli, doc, tc.cmdline, tc.wait, links)
			t.Logf("%s", out)
			if !strings.Contains(out, "ADDRESS "+named+" 10.88.0.2/24") {
				t.Errorf("no static address on %s", named)
			}
			var up float64
			if i := strings.Index(out, "\nUP "); i >= 0 {
				fmt.Sscanf(out[i+1:], "UP %f", &up)
			}
			if up > 5 {
				t.Errorf("up returned after %.1f s: it waited for DHCP beside a static network", up)
			}
			logged := func(msg, link string) bool {
				for l := range strings.Lines(out) {
					if strings.Contains(l, `msg="`+msg+`"`) && strings.Contains(l, " link="+link+" ") {
						return true
					}
				}
				return false
			}
			for _, l := range []string{named, dhcpA, dhcpB} {
				started, leased, want := logged("DHCP start", l), strings.Contains(out, "ADDRESS "+l+" 10."), slices.Contains(tc.leased, l)
				if l == named {
					leased = false // its static address is checked above
				}
				if started != want || leased != want {
					t.Errorf("%s: DHCP started %v, leased %v; want %v", l, started, leased, want)
				}
			}
			if tc.name == "none" && strings.Contains(dlog(), "DHCPDISCOVER") {
				t.Errorf("dnsmasq heard a DHCPDISCOVER with no NIC selected:\n%s", dlog())
			}
			if tc.name != "all-vlans" {
				return
			}
			// VLAN 100 is made beside the document, or the kernel's lack
			// of 802.1Q is reported naming it; 200 is the document's.
			if !strings.Contains(out, "LINK "+named+".100 VLAN 100") && !strings.Contains(out, "no 802.1Q VLAN support") {
				t.Errorf("%s.100 neither made nor reported impossible", named)
			}
			if strings.Contains(out, "LINK "+named+".200 VLAN 200") && !logged("VLAN interface exists already", named+".200") {
				t.Errorf("%s.200, the document's VLAN, was not left alone", named)
			}
		})
	}
}
