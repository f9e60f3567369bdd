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

func TestWaitCarrier(t *testing.T) {
	p := filepath.Join(t.TempDir(), "carrier")
	if waitCarrier(context.Background(), p, 50*time.Millisecond) {
		t.Error("no carrier file: reported up")
	}
	os.WriteFile(p, []byte("0\n"), 0o644)
	go func() {
		time.Sleep(60 * time.Millisecond)
		os.WriteFile(p+".new", []byte("1\n"), 0o644)
		os.Rename(p+".new", p)
	}()
	if !waitCarrier(context.Background(), p, 5*time.Second) {
		t.Error("carrier came up: reported down")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	os.WriteFile(p, []byte("0\n"), 0o644)
	if waitCarrier(ctx, p, time.Hour) {
		t.Error("cancelled: reported up")
	}
}

// TestDHCPRenewalHelper is the client side of TestDHCPLeaseRenewal, run
// by it in the client's network namespace: it takes a lease on the named
// link with the init's own code, keeps it for a while and prints the
// address the link holds at the end.
func TestDHCPRenewalHelper(t *testing.T) {
	spec := os.Getenv("RDINIT_DHCP_HELPER")
	if spec == "" {
		t.Skip("helper process of TestDHCPLeaseRenewal")
	}
	name, rest, _ := strings.Cut(spec, ",")
	hold, dir, _ := strings.Cut(rest, ",")
	if !filepath.IsAbs(dir) {
		// Never a relative or empty directory: the files must land in
		// the parent test's temporary directory and nowhere else.
		t.Fatalf("RDINIT_DHCP_HELPER %q: no absolute directory for resolv.conf and the host name", spec)
	}
	d, err := time.ParseDuration(hold)
	if err != nil {
		t.Fatal(err)
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	// The files the init writes go to the test's directory: this process
	// runs in a network namespace, which does not isolate files.
	n := New(log, Config{DHCPTimeout: 30 * time.Second,
		ResolvConf: filepath.Join(dir, "resolv.conf"), HostnameFile: filepath.Join(dir, "hostname")}, Options{})
	if err := n.dhcp(ctx, l); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		fmt.Printf("ADDRESS %s\n", a.IPNet)
	}
}

// TestDHCPLeaseRenewal runs Debian's dnsmasq in a network namespace, handing
// out a 2-minute lease (dnsmasq's shortest) with renewal (T1) after 4 s and
// rebinding (T2) after 7 s, and the init's DHCP client in another, over a
// veth pair: the client renews at T1, again and again, the server ACKs
// every renewal, and the address stays on the link.
func TestDHCPLeaseRenewal(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: holds a lease through three renewals (about 15 s)")
	}
	netnstest.RequireRoot(t, "dnsmasq")
	keepHostFiles(t)
	srv, cli, srvIf, cliIf := serverAndClient(t, "rdd")
	srv.IP("addr", "add", "10.77.0.1/24", "dev", srvIf)
	cli.IP("link", "set", cliIf, "address", "52:54:00:77:00:02")
	dlog := startDnsmasq(t, srv.Name, srvIf,
		"--dhcp-range=10.77.0.50,10.77.0.60,2m", "--dhcp-option=option:T1,4", "--dhcp-option=option:T2,7",
		"--dhcp-option=option:router,10.77.0.1", "--dhcp-option=option:dns-server,10.77.0.1,10.77.0.2",
		"--dhcp-option=option:domain-search,prov.example,example", "--dhcp-host=52:54:00:77:00:02,rdinit-test")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", cli.Name, os.Args[0], "-test.run=^TestDHCPRenewalHelper$", "-test.v")
	files := t.TempDir()
	cmd.Env = append(os.Environ(), "RDINIT_DHCP_HELPER="+cliIf+",11s,"+files)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	renewed := strings.Count(string(out), `msg="DHCP renewed"`)
	if renewed < 2 {
		t.Errorf("%d renewals in 11 s with T1 = 4 s, want at least 2:\n%s", renewed, out)
	}
	if !strings.Contains(string(out), "ADDRESS 10.77.0.") {
		t.Errorf("the link lost its address:\n%s", out)
	}
	// dnsmasq's side: the first lease and every renewal were ACKed.
	if acks := strings.Count(dlog(), "DHCPACK("+srvIf+")"); acks < 1+renewed {
		t.Errorf("dnsmasq sent %d ACKs for 1 lease and %d renewals:\n%s", acks, renewed, dlog())
	}
	// What the lease says about DNS and the host name lands in the files
	// the configuration names, and nowhere else.
	if b, err := os.ReadFile(filepath.Join(files, "resolv.conf")); err != nil {
		t.Error(err)
	} else if want := "search prov.example example\nnameserver 10.77.0.1\nnameserver 10.77.0.2\n"; !strings.HasSuffix(string(b), want) {
		t.Errorf("resolv.conf:\n%s\nwant it to end with:\n%s", b, want)
	}
	if b, err := os.ReadFile(filepath.Join(files, "hostname")); err != nil || string(b) != "rdinit-test" {
		t.Errorf("hostname file: %q, %v; want rdinit-test", b, err)
	}
	t.Logf("lease held 11 s with %d renewals", renewed)
}

// keepHostFiles fails the test if the host's own files the init writes
// (DNS, host name) do not come out as they went in.
func keepHostFiles(t *testing.T) {
	t.Helper()
	for _, p := range []string{"/etc/resolv.conf", "/proc/sys/kernel/hostname", "/etc/hostname"} {
		before, _ := os.ReadFile(p)
		t.Cleanup(func() {
			if after, _ := os.ReadFile(p); string(after) != string(before) {
				t.Errorf("the host's %s changed: %q -> %q", p, before, after)
			}
		})
	}
}

// startDnsmasq is netnstest.StartDnsmasq.
func startDnsmasq(t *testing.T, netns, iface string, args ...string) func() string {
	t.Helper()
	return netnstest.StartDnsmasq(t, netns, iface, args...)
}

// serverAndClient makes two namespaces joined by a veth pair, named after
// prefix (at most 4 bytes, to leave room in interface names).
func serverAndClient(t *testing.T, prefix string) (srv, cli *netnstest.Netns, srvIf, cliIf string) {
	t.Helper()
	id := netnstest.ID(t)
	srv = netnstest.NewNetns(t, prefix+"s-"+id)
	cli = netnstest.NewNetns(t, prefix+"c-"+id)
	srvIf, cliIf = prefix+"s"+id, prefix+"c"+id
	srv.Veth(srvIf, cli, cliIf)
	return srv, cli, srvIf, cliIf
}

// TestBootIFLateServer runs the init's network step on two NICs with
// BOOTIF naming the second in PXELINUX's form (01-aa-bb-...): the first
// NIC's DHCP server answers at once, the BOOTIF NIC's only 3 s later. The
// step must not go on with the first lease: it returns with the BOOTIF
// NIC's, the other lease kept beside it.
func TestBootIFLateServer(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: waits for a late DHCP server (about 7 s)")
	}
	netnstest.RequireRoot(t, "dnsmasq")
	keepHostFiles(t)
	id := netnstest.ID(t)
	srv := netnstest.NewNetns(t, "rdbis-"+id)
	cli := netnstest.NewNetns(t, "rdbic-"+id)
	decoy, boot := "rbd"+id, "rbi"+id
	srv.Veth("rsd"+id, cli, decoy)
	srv.Veth("rsi"+id, cli, boot)
	cli.IP("link", "set", decoy, "address", "52:54:00:87:00:01")
	cli.IP("link", "set", boot, "address", "52:54:00:87:00:02")
	srv.IP("addr", "add", "10.87.1.1/24", "dev", "rsd"+id)
	srv.IP("addr", "add", "10.87.2.1/24", "dev", "rsi"+id)
	startDnsmasq(t, srv.Name, "rsd"+id, "--dhcp-range=10.87.1.50,10.87.1.60,2m", "--no-ping")
	late := time.AfterFunc(3*time.Second, func() {
		startDnsmasq(t, srv.Name, "rsi"+id, "--dhcp-range=10.87.2.50,10.87.2.60,2m", "--no-ping")
	})
	defer late.Stop()
	out := runVLANHelper(t, cli, decoy+","+boot, "ironic_agent.ipv6=0 BOOTIF=01-52-54-00-87-00-02")
	t.Logf("%s", out)
	var up float64
	if i := strings.Index(out, "\nUP "); i >= 0 {
		fmt.Sscanf(out[i+1:], "UP %f", &up)
	}
	if up < 2.5 || !strings.Contains(out, "ADDRESS "+boot+" 10.87.2.") {
		t.Errorf("up returned after %.1f s: want it to wait for the BOOTIF NIC's late lease (3 s)", up)
	}
	if !strings.Contains(out, "ADDRESS "+decoy+" 10.87.1.") {
		t.Errorf("the first NIC lost its lease")
	}
}

// TestDHCPRetryAfterFirstWindow runs the init's network step on two NICs
// with a 4 s first DHCP window (two DISCOVERs: one lost while the first
// dnsmasq starts still leaves time): the first NIC's server answers at
// once, the second's starts only 8 s later, after that NIC's window.
// Up returns with the first lease, and the second NIC still gets its
// address from the background attempts (1 s apart here), as a late
// server's NIC does under dhclient in IPA's images, which
// ipa-inspection-dhcp-all-interfaces then waits for.
func TestDHCPRetryAfterFirstWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: waits for a late DHCP server (about 16 s)")
	}
	netnstest.RequireRoot(t, "dnsmasq")
	keepHostFiles(t)
	id := netnstest.ID(t)
	srv := netnstest.NewNetns(t, "rdrts-"+id)
	cli := netnstest.NewNetns(t, "rdrtc-"+id)
	early, late := "rre"+id, "rrl"+id
	srv.Veth("rse"+id, cli, early)
	srv.Veth("rsl"+id, cli, late)
	srv.IP("addr", "add", "10.87.3.1/24", "dev", "rse"+id)
	srv.IP("addr", "add", "10.87.4.1/24", "dev", "rsl"+id)
	startDnsmasq(t, srv.Name, "rse"+id, "--dhcp-range=10.87.3.50,10.87.3.60,2m", "--no-ping")
	timer := time.AfterFunc(8*time.Second, func() {
		startDnsmasq(t, srv.Name, "rsl"+id, "--dhcp-range=10.87.4.50,10.87.4.60,2m", "--no-ping")
	})
	defer timer.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", cli.Name, os.Args[0], "-test.run=^TestVLANDHCPHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "RDINIT_VLAN_HOLD=16s", "RDINIT_DHCP_RETRY=1s",
		"RDINIT_VLAN_HELPER="+early+","+late+" "+t.TempDir()+" ironic_agent.ipv6=0 ironic_agent.dhcp_timeout=4")
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	if !strings.Contains(out, EventDHCPRetrying) || !strings.Contains(out, "ADDRESS "+late+" 10.87.4.") {
		t.Errorf("want the late NIC's first window to end without a lease and a background attempt to get one from 10.87.4.0/24")
	}
	if !strings.Contains(out, "ADDRESS "+early+" 10.87.3.") {
		t.Errorf("the first NIC has no lease")
	}
}
