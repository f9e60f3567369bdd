package netup

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/vishvananda/netlink"
)

// vlanName is lldpcli's oui-info of an 802.1 VLAN Name TLV: the ID, the
// name's length, the name.
func vlanName(id int, name string) string {
	b := []string{fmt.Sprintf("%02x,%02x,%02x", id>>8, id&0xff, len(name))}
	for _, c := range []byte(name) {
		b = append(b, fmt.Sprintf("%02x", c))
	}
	return strings.Join(b, ",")
}

// startVLANSwitch runs Debian's lldpd on port, announcing VLAN Name TLVs
// for vlans (and a Port VLAN ID of 1, which must not become a VLAN link).
// This kernel may have no 802.1Q, so lldpd cannot learn the VLANs from
// sub-interfaces: the TLVs are configured byte for byte and lldpd sends
// them in its real frames.
func startVLANSwitch(t *testing.T, ns *netnstest.Netns, port string, vlans map[int]string) {
	t.Helper()
	conf := []string{"configure system hostname vlan-switch", "configure lldp tx-interval 1",
		fmt.Sprintf("configure ports %s lldp custom-tlv add oui 00,80,c2 subtype 1 oui-info 00,01", port)}
	ids := make([]int, 0, len(vlans))
	for id := range vlans {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		conf = append(conf, fmt.Sprintf("configure ports %s lldp custom-tlv add oui 00,80,c2 subtype 3 oui-info %s", port, vlanName(id, vlans[id])))
	}
	l := ns.StartLLDPD([]string{port}, conf)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := l.WaitReady(ctx, "vlan-switch"); err != nil {
		t.Fatal(err)
	}
}

// TestVLANsFromLLDPD is the "all" case's learning against Debian's lldpd
// in a network namespace: the init's LLDP step hears the VLAN Name TLVs on
// the NIC the switch is on, and nothing on a silent one within the bound.
func TestVLANsFromLLDPD(t *testing.T) {
	netnstest.RequireRoot(t, "lldpd", "lldpcli")
	id := netnstest.ID(t)
	sw := netnstest.NewNetns(t, "rdvlsw-"+id)
	host := netnstest.NewNetns(t, "rdvlh-"+id)
	swIf, nic, silent := "rvs"+id, "rvh"+id, "rvq"+id
	sw.Veth(swIf, host, nic)
	sw.Veth("rvx"+id, host, silent)
	startVLANSwitch(t, sw, swIf, map[int]string{100: "provisioning", 200: "storage"})

	var buf strings.Builder
	n := New(slog.New(slog.NewTextHandler(&buf, nil)), Config{LLDPTimeout: 5 * time.Second}, Options{})
	var got map[string][]int
	t0 := time.Now()
	// lldp.Capture opens its sockets on the calling goroutine: Do's
	// thread is in the host's namespace.
	if err := netnstest.Do(host.Name, func() error { got = n.lldpVLANs(t.Context(), []string{nic, silent}); return nil }); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	t.Logf("learned %v in %v\n%s", got, took.Round(time.Millisecond), buf.String())
	if !slices.Equal(got[nic], []int{100, 200}) || len(got[silent]) != 0 {
		t.Errorf("learned %v, want [100 200] on %s and nothing on %s", got, nic, silent)
	}
	if took > 7*time.Second {
		t.Errorf("took %v with a 5 s LLDP timeout", took)
	}
}

// runVLANHelper runs TestVLANDHCPHelper in the client namespace.
func runVLANHelper(t *testing.T, cli *netnstest.Netns, links, params string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", cli.Name, os.Args[0], "-test.run=^TestVLANDHCPHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "RDINIT_VLAN_HELPER="+links+" "+t.TempDir()+" "+params)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	return string(out)
}

// TestVLANsAfterTheLease checks that the init's network step, given
// "all", returns with the first lease on a plain NIC without waiting for
// LLDP (a silent NIC would otherwise cost the LLDP timeout on every boot),
// and that the LLDP step goes on: lldpd starts only once up has returned,
// and its VLAN is learned afterwards. On a kernel without 802.1Q the VLAN
// link fails, loudly, and the lease on the NIC stands.
func TestVLANsAfterTheLease(t *testing.T) {
	netnstest.RequireRoot(t, "dnsmasq", "lldpd", "lldpcli")
	keepHostFiles(t)
	srv, cli, srvIf, cliIf := serverAndClient(t, "rvw")
	srv.IP("addr", "add", "10.79.0.1/24", "dev", srvIf)
	startDnsmasq(t, srv.Name, srvIf, "--dhcp-range=10.79.0.50,10.79.0.60,2m", "--no-ping")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", cli.Name, os.Args[0], "-test.run=^TestVLANDHCPHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "RDINIT_VLAN_HOLD=6s", "RDINIT_VLAN_HELPER="+cliIf+","+cliIf+".100 "+t.TempDir()+
		" ipa-enable-vlan-interfaces=all ipa-collect-lldp=1 ipa-lldp-timeout=20")
	// The client writes to a file the test reads as it grows.
	outPath := filepath.Join(t.TempDir(), "client.out")
	outFile, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	output := func() string { b, _ := os.ReadFile(outPath); return string(b) }
	cmd.Stdout, cmd.Stderr = outFile, outFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for !strings.Contains(output(), "UP ") {
		select {
		case err := <-exited:
			t.Fatalf("the client ended (%v) before up returned:\n%s", err, output())
		case <-time.After(20 * time.Millisecond):
		}
	}
	startVLANSwitch(t, srv, srvIf, map[int]string{100: "provisioning"})
	if err := <-exited; err != nil {
		t.Fatalf("client: %v\n%s", err, output())
	}
	got := output()
	up, learned := strings.Index(got, "UP "), strings.Index(got, `msg="VLANs from LLDP"`)
	if learned < up || !strings.Contains(got[max(learned, 0):], "vlans=[100]") {
		t.Errorf("VLAN 100 not learned after up returned:\n%s", got)
	}
	if !strings.Contains(got, "ADDRESS "+cliIf+" 10.79.0.") {
		t.Errorf("no lease on the NIC:\n%s", got)
	}
	if !strings.Contains(got, "LINK "+cliIf+".100 VLAN 100") && !strings.Contains(got, "no 802.1Q VLAN support") {
		t.Errorf("%s.100 neither made nor reported impossible:\n%s", cliIf, got)
	}
	t.Logf("%s", got)
}

// TestVLANDHCP puts dnsmasq on VLAN 100 of a server namespace's veth (an
// 802.1Q sub-interface, serving DHCP on the VLAN only) and lldpd on the
// veth itself announcing VLAN 100, and runs the init's network step in the
// client namespace: with "veth.100" and with "all", it creates the VLAN
// link and takes a lease on it. The untagged network has no DHCP server.
func TestVLANDHCP(t *testing.T) {
	netnstest.RequireRoot(t, "dnsmasq", "lldpd", "lldpcli")
	keepHostFiles(t)
	for _, tc := range []struct{ name, param string }{
		{"named", "ipa-enable-vlan-interfaces=%s.100"},
		{"all", "ipa-enable-vlan-interfaces=all ipa-collect-lldp=1 ipa-lldp-timeout=10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli, srvIf, cliIf := serverAndClient(t, "rvd")
			tagged := srvIf + ".100"
			if out, err := exec.Command("ip", "-n", srv.Name, "link", "add", "link", srvIf, "name", tagged, "type", "vlan", "id", "100").CombinedOutput(); err != nil {
				t.Skipf("SKIPPED: this kernel has no 802.1Q VLAN links (CONFIG_VLAN_8021Q), so neither side can tag: %v: %s", err, strings.TrimSpace(string(out)))
			}
			srv.IP("link", "set", tagged, "up")
			srv.IP("addr", "add", "10.78.0.1/24", "dev", tagged)
			startVLANSwitch(t, srv, srvIf, map[int]string{100: "provisioning"})
			dlog := startDnsmasq(t, srv.Name, tagged, "--dhcp-range=10.78.0.50,10.78.0.60,2m")
			out := runVLANHelper(t, cli, cliIf+".100", strings.ReplaceAll(tc.param, "%s", cliIf))
			if !strings.Contains(out, "LINK "+cliIf+".100 VLAN 100") || !strings.Contains(out, "ADDRESS "+cliIf+".100 10.78.0.") {
				t.Errorf("no lease on %s.100:\n%s", cliIf, out)
			}
			if !strings.Contains(dlog(), "DHCPACK("+tagged+")") {
				t.Errorf("dnsmasq did not ACK on the VLAN:\n%s", dlog())
			}
			t.Logf("%s", out)
		})
	}
}

// TestExplicitVLANLinks creates named VLAN links with the init's code in a
// namespace: on a kernel with 802.1Q the link appears, up, on its parent
// (and a second request for it is left alone); on one without, the log
// says so, naming the entry. An entry for a NIC that is not there is
// logged and skipped either way.
func TestExplicitVLANLinks(t *testing.T) {
	netnstest.RequireRoot(t)
	id := netnstest.ID(t)
	a := netnstest.NewNetns(t, "rdvla-"+id)
	b := netnstest.NewNetns(t, "rdvlb-"+id)
	nic := "rve" + id
	a.Veth("rvp"+id, b, nic)
	reqs, errs := ParseVLANs(nic + ".100,nosuchnic.5," + nic + ".100")
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	var buf strings.Builder
	n := New(slog.New(slog.NewTextHandler(&buf, nil)), Config{}, Options{})
	loads := 0
	n.loadModule = func(name string) error {
		if name != "8021q" {
			t.Errorf("loaded module %q", name)
		}
		loads++
		return nil
	}
	var made []netlink.Link
	supported := true
	err := netnstest.Do(b.Name, func() error {
		l, err := netlink.LinkByName(nic)
		if err != nil {
			return err
		}
		made = n.explicitVLANs(reqs, []netlink.Link{l})
		_, err = netlink.LinkByName(nic + ".100")
		supported = err == nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	log := buf.String()
	t.Logf("802.1Q: %v\n%s", supported, log)
	if !strings.Contains(log, `entry=nosuchnic.5`) || !strings.Contains(log, "no such NIC") {
		t.Error("the entry for a missing NIC is not logged")
	}
	if loads != 1 {
		t.Errorf("8021q load asked %d times, want once", loads)
	}
	if !supported {
		if len(made) != 0 || !strings.Contains(log, "no 802.1Q VLAN support") || !strings.Contains(log, "entry="+nic+".100") {
			t.Errorf("made %v; the log must say the kernel has no 802.1Q, naming the entry", made)
		}
		return
	}
	if len(made) != 1 || made[0].Attrs().Name != nic+".100" || !strings.Contains(log, "exists already") {
		t.Errorf("made %v, want %s.100 once", made, nic)
	}
	out := b.IP("-d", "link", "show", nic+".100")
	if !strings.Contains(out, "vlan protocol 802.1Q id 100") || !strings.Contains(out, "@"+nic) {
		t.Errorf("ip link: %s", out)
	}
}
