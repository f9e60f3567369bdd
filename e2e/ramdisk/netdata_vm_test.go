package ramdisk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/netup"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestNetworkDataInVM boots the agent ramdisk DHCP-less, as Metal3's
// preprovisioningNetworkDataName does: no DHCP server anywhere, the
// network only in a config drive's openstack/latest/network_data.json.
// The VM's two NICs face netbed.BondSwitch (this host's kernel has no
// bonding, so a switch in user space plays the bond's partner), whose
// uplink is a tap in a network namespace holding the Ironic stand-in
// (ironicStandIn) on the static network's gateway address:
//
//   - lacp-vlan: an ISO 9660 config drive; an 802.3ad bond (miimon,
//     layer3+4) that the switch answers as an LACP partner, VLAN 300 over
//     it (tagged by the switch), static IPv4 and IPv6 on the VLAN, DNS;
//   - active-backup: a vfat config drive; an active-backup bond, static
//     IPv4 on the bond itself, no LACP.
//
// The agent looks up and heartbeats from the static address (the only
// one it has), inspection reports the link, the static IPv6 address
// answers from the namespace, and when the port the bond uses is cut
// (the cable pulled: QEMU's set_link, and the switch's port) and later
// restored, heartbeats go on over the other NIC; when the namespace's tap
// goes down for 5 s and up, they come back.
func TestNetworkDataInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots virtual machines")
	}
	netnstest.RequireRoot(t, "qemu-system-x86_64", "xorriso", "mkfs.vfat", "mcopy")
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(rd.InitrdRaw)
	if err != nil {
		t.Fatalf("the uncompressed initramfs: %v", err)
	}
	for _, m := range []string{"/bonding.ko", "/8021q.ko", "/isofs.ko"} {
		if !bytes.Contains(raw, []byte(m)) {
			t.Fatalf("the ramdisk carries no %s (internal/ramdisk's module list)", strings.TrimPrefix(m, "/"))
		}
	}
	for _, tc := range []netdataCase{
		{name: "lacp-vlan", iso: true, lacp: true, vid: 300, link: "bond0.300",
			doc: `{"links": [
			  {"id": "nic1", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:61"},
			  {"id": "nic2", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:62"},
			  {"id": "bond", "type": "bond", "bond_links": ["nic1", "nic2"], "bond_mode": "802.3ad", "bond_miimon": 100, "bond_xmit_hash_policy": "layer3+4"},
			  {"id": "prov", "type": "vlan", "vlan_link": "bond", "vlan_id": 300, "vlan_mac_address": "52:54:00:12:34:61"}],
			 "networks": [
			  {"id": "v4", "type": "ipv4", "link": "prov", "ip_address": "10.96.0.10", "netmask": "255.255.255.0",
			   "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.96.0.1"}]},
			  {"id": "v6", "type": "ipv6", "link": "prov", "ip_address": "fd00:96::10", "netmask": "64", "gateway": "fd00:96::1"}],
			 "services": [{"type": "dns", "address": "10.96.0.53"}, {"type": "dns", "address": "fd00:96::53"}]}`,
			server: "10.96.0.1", addr: "10.96.0.10", v6: "fd00:96::10", dns: "nameserver 10.96.0.53; nameserver fd00:96::53"},
		{name: "active-backup", link: "bond0",
			doc: `{"links": [
			  {"id": "nic1", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:63"},
			  {"id": "nic2", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:64"},
			  {"id": "bond", "type": "bond", "bond_links": ["nic1", "nic2"], "bond_mode": "active-backup", "bond_miimon": 100}],
			 "networks": [{"id": "v4", "type": "ipv4", "link": "bond", "ip_address": "10.97.0.10/24", "gateway": "10.97.0.1"}],
			 "services": [{"type": "dns", "address": "10.97.0.53"}]}`,
			server: "10.97.0.1", addr: "10.97.0.10", dns: "nameserver 10.97.0.53"},
	} {
		t.Run(tc.name, func(t *testing.T) { networkDataVM(ctx, t, rd, tc) })
	}
}

// TestNetworkDataDynamicInVM boots the agent ramdisk with network data
// that asks for addresses from servers: ipv4_dhcp on one NIC and
// ipv6_slaac on another, each NIC's tap in a network namespace of its own
// with dnsmasq (DHCPv4 without a router option; router advertisements
// with a router lifetime of 0, so no default route either), and a third
// NIC the document does not name on a slirp network whose DHCP server
// would answer. Each network's route in the document is the only way to
// the service behind it: the inspector callback at 10.86.0.1 through
// 10.85.0.1, Ironic's API at [fd00:7d::1] through fd00:7c::1. The agent
// posts its inspection over the DHCPv4 address and looks up and
// heartbeats over the SLAAC address, which needs both routes, added once
// the addresses are there; the third NIC gets no DHCP and no address.
// Beside the document, ipa-enable-vlan-interfaces names VLAN 100 on the
// DHCPv4 NIC, whose port is a trunk (netbed.Trunk) with a third dnsmasq
// on VLAN 100: the init makes eth0.100 and takes a lease on it, as an IPA
// image with DIB's dhcp-all-interfaces does.
func TestNetworkDataDynamicInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine")
	}
	netnstest.RequireRoot(t, "dnsmasq", "qemu-system-x86_64", "xorriso")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := netnstest.ID(t)
	v4, err := netbed.NewNetns(ctx, "rdn4-"+id, "vmn4"+id, "02:11:22:33:44:b1", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v4.Close)
	v6, err := netbed.NewNetns(ctx, "rdn6-"+id, "vmn6"+id, "02:11:22:33:44:b2", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v6.Close)
	// The services sit on each namespace's loopback, a network away
	// from the guest's.
	netnstest.Run(t, "ip", "-n", v4.Name, "addr", "add", "10.85.0.1/24", "dev", v4.Tap)
	netnstest.Run(t, "ip", "-n", v4.Name, "addr", "add", "10.86.0.1/32", "dev", "lo")
	netnstest.Run(t, "ip", "-n", v6.Name, "-6", "addr", "add", "fd00:7c::1/64", "dev", v6.Tap, "nodad")
	netnstest.Run(t, "ip", "-n", v6.Name, "-6", "addr", "add", "fd00:7d::1/128", "dev", "lo", "nodad")
	dlog4 := netnstest.StartDnsmasq(t, v4.Name, v4.Tap, "--dhcp-range=10.85.0.50,10.85.0.60,2m", "--no-ping", "--dhcp-option=option:router")
	dlog6 := netnstest.StartDnsmasq(t, v6.Name, v6.Tap, "--enable-ra", "--dhcp-range=fd00:7c::,ra-stateless,64,2m",
		"--ra-param="+v6.Tap+",10,0", "--dhcp-option=option6:dns-server,[fd00:7c::53]")
	vlan, err := netbed.NewNetns(ctx, "rdnv-"+id, "vmnv"+id, "02:11:22:33:44:b3", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vlan.Close)
	netnstest.Run(t, "ip", "-n", vlan.Name, "addr", "add", "10.84.0.1/24", "dev", vlan.Tap)
	dlogVLAN := netnstest.StartDnsmasq(t, vlan.Name, vlan.Tap, "--dhcp-range=10.84.0.50,10.84.0.60,2m", "--no-ping", "--dhcp-option=option:router")
	tr, trunk, err := netbed.StartTrunk(v4.File, vlan.File, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer trunk.Close()
	t.Cleanup(tr.Close)
	inspector := startIronicStandIn(t, v4.Name, "10.86.0.1")
	ironic := startIronicStandIn(t, v6.Name, "fd00:7d::1")

	const unnamed = "52:54:00:12:34:73"
	doc := `{"links": [
	  {"id": "nic4", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:71"},
	  {"id": "nic6", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:72"}],
	 "networks": [
	  {"id": "dhcp4", "type": "ipv4_dhcp", "link": "nic4",
	   "routes": [{"network": "10.86.0.0", "netmask": "255.255.255.0", "gateway": "10.85.0.1"}]},
	  {"id": "slaac6", "type": "ipv6_slaac", "link": "nic6",
	   "routes": [{"network": "fd00:7d::", "netmask": "64", "gateway": "fd00:7c::1"}]}],
	 "services": [{"type": "dns", "address": "10.85.0.53"}]}`
	m := netdataMachine(t, rd, doc, true, "ipa-api-url=http://[fd00:7d::1]:6385 ipa-inspection-callback-url=http://10.86.0.1:5050/v1/continue"+
		" ipa-enable-vlan-interfaces=52:54:00:12:34:71.100")
	m.NICs = []qemu.NIC{
		{Model: "virtio-net-pci", MAC: "52:54:00:12:34:71", Backend: qemu.NICStream, File: trunk},
		{Model: "virtio-net-pci", MAC: "52:54:00:12:34:72", Backend: qemu.NICTap, File: v6.File},
		{Model: "virtio-net-pci", MAC: unnamed, Backend: qemu.NICIsolated},
	}
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	trunk.Close() // QEMU has its copy
	fail := func(format string, args ...any) {
		t.Helper()
		// The guest's addresses, as its inventory reported them.
		var inv []string
		if body, err := inspector.wait(ctx, "continue", 0); err == nil {
			nics, _ := inventoryNICs(body)
			for _, i := range nics {
				inv = append(inv, i.Name+"="+deref(i.IPv4Address)+" "+deref(i.IPv6Address))
			}
		}
		t.Fatalf("%s\n%s\nthe IPv6 namespace:\n%s\ndnsmasq (v4):\n%s\ndnsmasq (v6):\n%s\ndnsmasq (VLAN 100):\n%s\ninspection data:\n%s", fmt.Sprintf(format, args...), consoleTail(vm),
			netnsIPv6State(ctx, v6.Name), dlog4(), dlog6(), dlogVLAN(), strings.Join(inv, "\n"))
	}
	first, nics := heartbeatAndInventory(ctx, vm, ironic, inspector, fail)
	got := map[string]string{}
	var names []string
	for _, i := range nics {
		// By MAC for the physical NICs: eth0.100 has eth0's.
		if !strings.Contains(i.Name, ".") {
			got[i.MAC] = deref(i.IPv4Address) + " " + deref(i.IPv6Address)
		}
		names = append(names, i.Name+"="+deref(i.IPv4Address)+" "+deref(i.IPv6Address))
	}
	t.Logf("inventory: %v", names)
	const slaac = "fd00:7c::5054:ff:fe12:3472"
	if c := inspector.clients(); len(c) != 1 || !strings.HasPrefix(c[0], "10.85.0.") {
		t.Errorf("the inspector was called from %v, want the DHCPv4 address only", c)
	}
	if c := ironic.clients(); !slices.Equal(c, []string{slaac}) {
		t.Errorf("Ironic was called from %v, want the SLAAC address %s only", c, slaac)
	}
	if v4, _, _ := strings.Cut(got["52:54:00:12:34:71"], " "); !strings.HasPrefix(v4, "10.85.0.") {
		t.Errorf("inventory: the ipv4_dhcp NIC has %q", got["52:54:00:12:34:71"])
	}
	if a := got[unnamed]; !strings.HasPrefix(a, "null ") {
		t.Errorf("inventory: the NIC the document does not name has %q, want no IPv4 address", a)
	}
	// The VLAN's lease may come after the inspection: the first address
	// let the agent start.
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if _, err := vm.WaitFor(wctx, logtext.Msg(netup.EventDHCPLease)+` component=init component=network link=eth0.100 address=10.84.0.`); err != nil {
		fail("no lease on eth0.100: %v", err)
	}
	var starts, routes []string
	var resolv, lease, ra string
	for _, l := range vm.Lines() {
		switch {
		case strings.Contains(l.Text, logtext.Msg(netup.EventDHCPStart)):
			starts = append(starts, l.Text)
		case strings.Contains(l.Text, logtext.Msg(netup.EventDHCPLease)) && strings.Contains(l.Text, "link=eth0 "):
			lease = l.Text
		case strings.Contains(l.Text, logtext.Msg(netup.EventIPv6RouterAdvertisement)):
			ra = l.Text
		case strings.Contains(l.Text, logtext.Msg(netup.EventRoutes)):
			routes = append(routes, l.Text)
		case strings.Contains(l.Text, logtext.Msg(netup.EventResolvConfWritten)):
			resolv = l.Text
		}
	}
	if len(starts) != 2 || !strings.Contains(starts[0]+starts[1], "link=eth0 ") || !strings.Contains(starts[0]+starts[1], "link=eth0.100 ") {
		t.Errorf("DHCP started %q, want it on the ipv4_dhcp NIC (eth0) and its VLAN eth0.100 only", starts)
	}
	if len(routes) != 2 {
		t.Errorf("routes logged %q, want the two networks'", routes)
	}
	// Only the document's routes lead to the services.
	if !strings.Contains(lease, "router=[]") || !strings.Contains(ra, "router_lifetime=0") {
		t.Errorf("want a lease without a router and an RA without a default router:\n%s\n%s", lease, ra)
	}
	if !strings.Contains(resolv, "nameserver 10.85.0.53") {
		t.Errorf("resolv.conf: %q, want the document's server", resolv)
	}
	for _, l := range append(starts, append(routes, lease, ra)...) {
		t.Logf("%s", strings.TrimSpace(l))
	}
	t.Logf("VM: first heartbeat %v after QEMU start, VM ran %v; trunk: %d tagged frames in, %d out", first.Round(time.Second), vm.Elapsed().Round(time.Second),
		tr.TaggedIn.Load(), tr.TaggedOut.Load())
	vm.Kill()
}

type netdataCase struct {
	name string
	iso  bool // the config drive is ISO 9660 (else vfat)
	lacp bool
	vid  uint16
	doc  string
	link string // the guest's link with the address
	// server is the stand-in's address (the gateway), addr and v6 the
	// guest's static addresses, dns resolv.conf's servers as logged.
	server, addr, v6, dns string
}

func networkDataVM(ctx context.Context, t *testing.T, rd *qemu.Ramdisk, tc netdataCase) {
	id := netnstest.ID(t)
	ns, err := netbed.NewNetns(ctx, "rdnd-"+id, "vmnd"+id, "02:11:22:33:44:aa", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	netnstest.Run(t, "ip", "-n", ns.Name, "addr", "add", tc.server+"/24", "dev", ns.Tap)
	if tc.v6 != "" {
		netnstest.Run(t, "ip", "-n", ns.Name, "-6", "addr", "add", "fd00:96::1/64", "dev", ns.Tap, "nodad")
	}
	standIn := startIronicStandIn(t, ns.Name, tc.server)
	sw, ends, err := netbed.StartBondSwitch(2, ns.File, tc.vid, tc.lacp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sw.Close)

	base := "http://" + tc.server
	m := netdataMachine(t, rd, tc.doc, tc.iso, "ipa-api-url="+base+":6385 ipa-inspection-callback-url="+base+":5050/v1/continue")
	m.Monitor = filepath.Join(m.Dir, "monitor.sock")
	var macs []string
	var doc struct {
		Links []struct {
			Type string `json:"type"`
			MAC  string `json:"ethernet_mac_address"`
		} `json:"links"`
	}
	if err := json.Unmarshal([]byte(tc.doc), &doc); err != nil {
		t.Fatal(err)
	}
	for _, l := range doc.Links {
		if l.Type == "phy" {
			macs = append(macs, l.MAC)
		}
	}
	for i, f := range ends {
		// A speed and full duplex: Linux's 802.3ad bond runs LACP only
		// on full-duplex ports, and virtio-net reports neither unless
		// QEMU is told.
		m.NICs = append(m.NICs, qemu.NIC{Model: "virtio-net-pci,speed=10000,duplex=full", MAC: macs[i], Backend: qemu.NICStream, File: f})
	}
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	for _, f := range ends {
		f.Close() // QEMU has its copies
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\n%s\nswitch: LACP in %d out %d, frames in %d out %d, dropped %d", fmt.Sprintf(format, args...), consoleTail(vm),
			sw.LACPIn.Load(), sw.LACPOut.Load(), sw.FramesIn.Load(), sw.FramesOut.Load(), sw.Dropped.Load())
	}
	first, nics := heartbeatAndInventory(ctx, vm, standIn, standIn, fail)
	var names []string
	found := false
	for _, i := range nics {
		names = append(names, i.Name+"="+deref(i.IPv4Address))
		found = found || i.Name == tc.link && deref(i.IPv4Address) == tc.addr
	}
	if !found {
		t.Errorf("inventory interfaces %v: want %s with %s", names, tc.link, tc.addr)
	}
	if got := standIn.clients(); !slices.Equal(got, []string{tc.addr}) {
		t.Errorf("the stand-in was called from %v, want only the static address %s", got, tc.addr)
	}
	if tc.v6 != "" {
		// The static IPv6 address answers: the agent's API port, from
		// the namespace.
		if err := netnstest.Do(ns.Name, func() error {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(tc.v6, "9999"), 10*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}); err != nil {
			t.Errorf("the agent's API on the static IPv6 address, from the namespace: %v", err)
		}
	}
	if tc.lacp {
		// The guest's ports reach collecting and distributing once its
		// mux machines have waited out their timers (2 s, 100 ms ticks
		// that run slow under emulation): allow them half a minute.
		const want = netbed.LACPSync | netbed.LACPCollecting | netbed.LACPDistributing
		synced := func() bool {
			for i := range 2 {
				if st, ok := sw.ActorState(i); !ok || st&want != want {
					return false
				}
			}
			return true
		}
		t0 := time.Now()
		for !synced() && time.Since(t0) < 30*time.Second {
			time.Sleep(200 * time.Millisecond)
		}
		for i := range 2 {
			st, _ := sw.ActorState(i)
			t.Logf("port %d: the guest's LACP actor states % x (last %#x)", i, sw.ActorStates(i), st)
		}
		if !synced() {
			t.Errorf("the guest's LACP ports are not all in sync, collecting and distributing after %v; its last LACPDUs:\n% x\n% x",
				time.Since(t0).Round(time.Second), sw.LastLACPDU(0), sw.LastLACPDU(1))
		}
	}

	// The flap: the port in use loses its cable, heartbeats go on over
	// the other; then it comes back.
	port := sw.LastPort()
	flap := func(up bool) {
		state := map[bool]string{true: "on", false: "off"}[up]
		if out, err := vm.Monitor(ctx, fmt.Sprintf("set_link n%d %s", port, state)); err != nil {
			fail("set_link: %v %s", err, out)
		}
		sw.SetPort(port, up)
	}
	cut := time.Now()
	flap(false)
	if err := waitHeartbeats(ctx, standIn, cut, 3, 90*time.Second); err != nil {
		fail("with port %d cut: %v", port, err)
	}
	after := sw.LastPort()
	restored := time.Now()
	flap(true)
	if err := waitHeartbeats(ctx, standIn, restored, 2, 60*time.Second); err != nil {
		fail("with port %d back: %v", port, err)
	}
	if tc.lacp {
		// The port that came back rejoins the aggregation.
		const want = netbed.LACPSync | netbed.LACPCollecting | netbed.LACPDistributing
		t0 := time.Now()
		for st, _ := sw.ActorState(port); st&want != want; st, _ = sw.ActorState(port) {
			if time.Since(t0) > 30*time.Second {
				t.Errorf("port %d, back: the guest's LACP actor state %#x, want it collecting and distributing again", port, st)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// Then the namespace's own tap goes down for 5 s (Ironic's side of
	// the network gone, both NICs' carrier up): heartbeats fail, and
	// come back once it is up.
	down := time.Now()
	netnstest.Run(t, "ip", "-n", ns.Name, "link", "set", ns.Tap, "down")
	time.Sleep(5 * time.Second)
	netnstest.Run(t, "ip", "-n", ns.Name, "link", "set", ns.Tap, "up")
	if err := waitHeartbeats(ctx, standIn, down.Add(5*time.Second), 2, 90*time.Second); err != nil {
		fail("after the namespace's tap came back: %v", err)
	}
	beats := standIn.calls("heartbeat")
	var gap time.Duration
	for i := 1; i < len(beats); i++ {
		gap = max(gap, beats[i].Sub(beats[i-1]))
	}
	if after == port {
		t.Errorf("the guest still sent on port %d after it was cut", port)
	}
	var applied, resolv, dhcp string
	for _, l := range vm.Lines() {
		switch {
		case strings.Contains(l.Text, logtext.Msg(netup.EventNetworkDataApplied)):
			applied = l.Text
		case strings.Contains(l.Text, logtext.Msg(netup.EventResolvConfWritten)):
			resolv = l.Text
		case strings.Contains(l.Text, logtext.Msg(netup.EventDHCPStart)):
			dhcp = l.Text
		}
	}
	if !strings.Contains(applied, "errors=0") {
		t.Errorf("network data: %q, want applied without errors", applied)
	}
	if !strings.Contains(resolv, tc.dns) {
		t.Errorf("resolv.conf: %q, want %q", resolv, tc.dns)
	}
	if dhcp != "" {
		t.Errorf("the init ran DHCP: %s", dhcp)
	}
	t.Logf("%s\n%s", strings.TrimSpace(applied), strings.TrimSpace(resolv))
	t.Logf("VM: first heartbeat %v after QEMU start; %d heartbeats, longest gap %v; cut port %d, traffic moved to port %d; switch: LACP in %d out %d, frames in %d out %d, dropped %d; VM ran %v",
		first.Round(time.Second), len(beats), gap.Round(100*time.Millisecond), port, after,
		sw.LACPIn.Load(), sw.LACPOut.Load(), sw.FramesIn.Load(), sw.FramesOut.Load(), sw.Dropped.Load(), vm.Elapsed().Round(time.Second))
	vm.Kill()
}

// netdataMachine is the VM of the network-data tests: the agent ramdisk
// (BIOS, 768 MiB) with a config drive holding doc as its only disk
// (ISO 9660 or vfat, see writeConfigDrive), and the agent's parameters
// (the Ironic and inspector URLs in params) on its command line; no NICs
// yet.
func netdataMachine(t *testing.T, rd *qemu.Ramdisk, doc string, iso bool, params string) qemu.Machine {
	t.Helper()
	m := qemu.DefaultMachine("bios")
	m.Name = "ironic-agent-netdata"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.MemoryMB = 768
	m.Disks = []qemu.Disk{{ID: "config", Kind: qemu.DiskVirtioBlk, SizeMB: 4, Serial: "CONFIG-DRIVE"}}
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeConfigDrive(t, m.DiskPath("config"), doc, iso)
	m.NICs = nil
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	// net.ifnames=0: the checks name the NIC eth0 (TestNICNamesInVM
	// covers the predictable names).
	m.Append = params + " ipa-disk-wait-attempts=0 ironic_agent.exit=poweroff net.ifnames=0"
	return m
}

// heartbeatAndInventory waits for the agent's first heartbeat to ironic
// (5 minutes) and for its inspection data to inspector (a minute more),
// and returns the heartbeat's time since QEMU started and the inventory's
// interfaces; fail reports what did not come.
func heartbeatAndInventory(ctx context.Context, vm *qemu.VM, ironic, inspector ironicStandIn, fail func(string, ...any)) (time.Duration, []inspectedNIC) {
	if _, err := ironic.wait(ctx, "heartbeat", 5*time.Minute); err != nil {
		fail("no heartbeat: %v; Ironic's stand-in saw %v, the inspector's %v", err, ironic.paths(), inspector.paths())
	}
	first := vm.Elapsed()
	inv, err := inspector.wait(ctx, "continue", time.Minute)
	if err != nil {
		fail("no inspection data: %v", err)
	}
	nics, err := inventoryNICs(inv)
	if err != nil {
		fail("%v", err)
	}
	return first, nics
}

// waitHeartbeats waits for n heartbeats after since.
func waitHeartbeats(ctx context.Context, s ironicStandIn, since time.Time, n int, max time.Duration) error {
	deadline := time.Now().Add(max)
	for {
		got := 0
		for _, at := range s.calls("heartbeat") {
			if at.After(since) {
				got++
			}
		}
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d heartbeats in %v, want %d", got, max, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// writeConfigDrive writes a config drive holding doc as
// openstack/latest/network_data.json to path: ISO 9660 with Rock Ridge and
// Joliet names as Ironic's mkisofs makes them (xorriso's, in test.sh's
// packages), or a 4 MiB vfat made by mkfs.vfat and filled by mcopy, both
// labelled config-2.
func writeConfigDrive(t *testing.T, path, doc string, iso bool) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "drive")
	latest := filepath.Join(src, "openstack", "latest")
	if err := os.MkdirAll(latest, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(latest, "network_data.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if iso {
		netnstest.Run(t, "xorriso", "-as", "mkisofs", "-quiet", "-r", "-J", "-V", "config-2", "-o", path, src)
		return
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(4 << 20)
	f.Close()
	netnstest.Run(t, "mkfs.vfat", "-n", "CONFIG-2", path)
	netnstest.Run(t, "mcopy", "-s", "-i", path, filepath.Join(src, "openstack"), "::")
}
