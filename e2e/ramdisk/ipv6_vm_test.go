package ramdisk_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/netup"
	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/fakeironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestIPv6InVM boots the agent ramdisk on a provisioning network that
// dnsmasq, in a network namespace behind the VM's NIC, serves with router
// advertisements, and points the agent at Ironic and the inspector by
// bracketed IPv6 literals of that namespace (ipa-api-url=http://[fd00:..::1]:6385),
// reachable from the guest over IPv6 only:
//
//   - stateful: IPv6 only, the address by DHCPv6 (IA_NA) from a reservation
//     on the guest's DUID-LL, DNS from DHCPv6;
//   - slaac: IPv6 only, SLAAC with DNS from the RA and DHCPv6
//     (ra-stateless);
//   - slaac-dual: the same with DHCPv4 on the same link (dual stack).
//
// The guest's agent posts its inventory to the inspector callback (the
// inventory's ipv6_address is the guest's global address, the first in
// the kernel's order as in IPA; in dual stack the DHCPv4 lease may come
// first and start the agent, whose inventory then has the IPv4 address
// and only the link-local IPv6 one), looks its node up
// and heartbeats with an https callback URL on its IPv6 address (auto TLS:
// the recorded Ironic is 1.68 or later), and that URL answers from the
// namespace to a client verifying the agent's certificate, as Ironic does,
// against the IPv6 address. The Ironic and inspector APIs are a stand-in
// in this test, answering with Ironic 21.4's recorded lookup (fakeironic,
// see ironicStandIn): Ironic itself runs on the host's loopback in e2e, and
// cannot reach the guest's IPv6 address there.
func TestIPv6InVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots virtual machines")
	}
	netnstest.RequireRoot(t, "dnsmasq", "qemu-system-x86_64")
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []ipv6Case{
		{name: "stateful", prefix: "fd00:79::", mac: "52:54:00:12:34:51",
			dnsmasq: []string{"--enable-ra", "--dhcp-range=fd00:79::10,fd00:79::20,64,2m", "--dhcp-option=option6:dns-server,[fd00:79::53]",
				"--dhcp-host=id:00:03:00:01:52:54:00:12:34:51,[fd00:79::51]"},
			wantAddr: "fd00:79::51", wantDNS: "nameserver fd00:79::53"},
		{name: "slaac-dual", prefix: "fd00:7a::", mac: "52:54:00:12:34:52", v4: "10.80.0.1/24",
			dnsmasq: []string{"--enable-ra", "--dhcp-range=fd00:7a::,ra-stateless,64,2m", "--dhcp-option=option6:dns-server,[fd00:7a::53]",
				"--dhcp-range=10.80.0.50,10.80.0.60,2m", "--no-ping", "--dhcp-option=option:dns-server,10.80.0.53"},
			wantAddr: "fd00:7a::5054:ff:fe12:3452", wantDNS: "nameserver fd00:7a::53", wantV4: "10.80.0."},
		{name: "slaac", prefix: "fd00:7b::", mac: "52:54:00:12:34:53",
			dnsmasq:  []string{"--enable-ra", "--dhcp-range=fd00:7b::,ra-stateless,64,2m", "--dhcp-option=option6:dns-server,[fd00:7b::53]"},
			wantAddr: "fd00:7b::5054:ff:fe12:3453", wantDNS: "nameserver fd00:7b::53"},
	} {
		t.Run(tc.name, func(t *testing.T) { ipv6VM(ctx, t, rd, tc) })
	}
}

type ipv6Case struct {
	name, prefix, mac string
	v4                string // the namespace's IPv4 address for dual stack
	dnsmasq           []string
	wantAddr, wantDNS string
	wantV4            string // prefix of the guest's DHCPv4 address, dual stack
}

func ipv6VM(ctx context.Context, t *testing.T, rd *qemu.Ramdisk, tc ipv6Case) {
	id := netnstest.ID(t)
	ns, err := netbed.NewNetns(ctx, "rd6-"+id, "vm6"+id, "02:11:22:33:44:99", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	server := tc.prefix + "1"
	netnstest.Run(t, "ip", "-n", ns.Name, "-6", "addr", "add", server+"/64", "dev", ns.Tap, "nodad")
	if tc.v4 != "" {
		netnstest.Run(t, "ip", "-n", ns.Name, "addr", "add", tc.v4, "dev", ns.Tap)
	}
	dlog := netnstest.StartDnsmasq(t, ns.Name, ns.Tap, tc.dnsmasq...)
	standIn := startIronicStandIn(t, ns.Name, server)

	m := qemu.DefaultMachine("bios")
	m.Name = "ironic-agent-ipv6"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.Disks = nil
	m.MemoryMB = 768
	m.NICs = []qemu.NIC{{Model: "virtio-net-pci", MAC: tc.mac, Backend: qemu.NICTap}}
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	base := "http://[" + server + "]"
	m.Append = "ipa-api-url=" + base + ":6385 ipa-inspection-callback-url=" + base + ":5050/v1/continue" +
		" ipa-disk-wait-attempts=0 ironic_agent.dhcp_timeout=30 ironic_agent.exit=poweroff"
	vm, err := qemu.Start(ctx, m, qemu.Options{Tap: ns.File})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	fail := func(format string, args ...any) {
		t.Helper()
		qemu := "QEMU running"
		if gone, err := vm.Exited(); gone {
			qemu = fmt.Sprintf("QEMU exited: %v", err)
		}
		t.Fatalf("%s\n%s\n%s\nthe namespace's side of the link:\n%s\ndnsmasq:\n%s",
			fmt.Sprintf(format, args...), consoleTail(vm), qemu, netnsIPv6State(ctx, ns.Name), dlog())
	}
	hb, err := standIn.wait(ctx, "heartbeat", 5*time.Minute)
	if err != nil {
		fail("no heartbeat: %v; the stand-in saw %v", err, standIn.paths())
	}
	took := vm.Elapsed()
	var hbBody struct {
		CallbackURL string `json:"callback_url"`
		VerifyCA    string `json:"agent_verify_ca"`
	}
	if err := json.Unmarshal(hb, &hbBody); err != nil {
		fail("heartbeat body %q: %v", hb, err)
	}
	if want := "https://[" + tc.wantAddr + "]:9999"; hbBody.CallbackURL != want {
		t.Errorf("heartbeat callback_url %q, want %q", hbBody.CallbackURL, want)
	}
	// The agent's API answers at that URL, over IPv6, from the namespace,
	// with the certificate it sent verified against the address.
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(hbBody.VerifyCA)) {
		fail("agent_verify_ca is no PEM certificate: %q", hbBody.VerifyCA)
	}
	api := &agentclient.Client{Base: hbBody.CallbackURL, HTTP: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: netbed.Dialer(ns.Name), TLSClientConfig: &tls.Config{RootCAs: pool}}}}
	status, _, err := api.List(ctx)
	if err != nil {
		fail("GET %s/v1/commands/ from the namespace, verifying the agent's certificate: %v (%v after QEMU start)", hbBody.CallbackURL, err, vm.Elapsed().Round(time.Second))
	}
	if status != http.StatusOK {
		t.Errorf("GET %s/v1/commands/ from the namespace: HTTP %d", hbBody.CallbackURL, status)
	}
	inv, err := standIn.wait(ctx, "continue", time.Minute)
	if err != nil {
		fail("no inspection data: %v; the stand-in saw %v", err, standIn.paths())
	}
	nics, err := inventoryNICs(inv)
	if err != nil {
		fail("%v", err)
	}
	found := false
	for _, i := range nics {
		if i.MAC != tc.mac {
			continue
		}
		found = true
		v4, v6 := deref(i.IPv4Address), deref(i.IPv6Address)
		t.Logf("inventory: %s %s ipv4_address=%s ipv6_address=%s", i.Name, i.MAC, v4, v6)
		// Dual stack: the agent may have started on the DHCPv4 lease
		// before SLAAC was done, with only the link-local address.
		early := tc.wantV4 != "" && (v6 == "null" || strings.HasPrefix(v6, "fe80::"))
		if v6 != tc.wantAddr && !early {
			t.Errorf("inventory ipv6_address %q, want %q", v6, tc.wantAddr)
		}
		if tc.wantV4 != "" && !strings.HasPrefix(v4, tc.wantV4) {
			t.Errorf("inventory ipv4_address %q, want one in %s (dual stack)", v4, tc.wantV4)
		}
	}
	if !found {
		t.Errorf("inventory has no interface %s: %s", tc.mac, inv)
	}
	var ra, lease, resolv string
	for _, l := range vm.Lines() {
		switch {
		case strings.Contains(l.Text, logtext.Msg(netup.EventIPv6RouterAdvertisement)):
			ra = l.Text
		case strings.Contains(l.Text, logtext.Msg(netup.EventIPv6Address)):
			lease = l.Text
		case strings.Contains(l.Text, logtext.Msg(netup.EventResolvConfWritten)):
			resolv = l.Text
		}
	}
	for _, l := range []string{ra, lease, resolv} {
		t.Logf("%s", strings.TrimSpace(l))
	}
	if !strings.Contains(resolv, tc.wantDNS) {
		t.Errorf("the guest's resolv.conf lacks %q: %s", tc.wantDNS, resolv)
	}
	t.Logf("VM: heartbeat %v after QEMU start; stand-in saw %v", took.Round(time.Second), standIn.paths())
	vm.Kill()
}

// inspectedNIC is an interface of the inventory the agent posted for
// inspection.
type inspectedNIC struct {
	Name        string  `json:"name"`
	MAC         string  `json:"mac_address"`
	IPv4Address *string `json:"ipv4_address"`
	IPv6Address *string `json:"ipv6_address"`
}

// inventoryNICs decodes the interfaces of inspection data.
func inventoryNICs(body []byte) ([]inspectedNIC, error) {
	var data struct {
		Inventory struct {
			Interfaces []inspectedNIC `json:"interfaces"`
		} `json:"inventory"`
	}
	if err := json.Unmarshal(body, &data); err != nil {
		return nil, fmt.Errorf("inspection data: %w", err)
	}
	return data.Inventory.Interfaces, nil
}

func deref(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// ironicStandIn is the test bed's fake Ironic 21.4 (fakeironic), which
// also answers ironic-inspector's callback, served inside a namespace on
// both APIs' ports: API version discovery, lookup, heartbeat and the
// inspection data, each request recorded.
type ironicStandIn struct{ *fakeironic.Server }

// The node of the recorded lookup, and its agent token.
const (
	standInNode  = "ff890ff6-6023-4f5f-9d87-4a3f87f7e551"
	standInToken = "tiFtwpghhKF8HV0FrSMOh3aAsw31mpadirCo2f7hKu0"
)

// standInPaths are the paths of the kinds of calls the tests wait on.
var standInPaths = map[string]string{"heartbeat": "/v1/heartbeat/" + standInNode, "continue": "/v1/continue", "lookup": "/v1/lookup"}

func startIronicStandIn(t *testing.T, ns, addr string) ironicStandIn {
	t.Helper()
	s := ironicStandIn{&fakeironic.Server{NodeUUID: standInNode, Token: standInToken}}
	for _, port := range []string{"6385", "5050"} {
		var l net.Listener
		err := netnstest.Do(ns, func() (err error) {
			l, err = net.Listen("tcp", net.JoinHostPort(addr, port))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: s.Server, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	return s
}

// wait returns the body of the first accepted call of the kind, waiting
// up to max.
func (s ironicStandIn) wait(ctx context.Context, kind string, max time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, max)
	defer cancel()
	r, err := s.First(ctx, standInPaths[kind])
	if err != nil {
		return nil, fmt.Errorf("no %s within %v: %w", kind, max, err)
	}
	return r.Body, nil
}

// calls returns the times of every call of the kind so far.
func (s ironicStandIn) calls(kind string) []time.Time {
	var out []time.Time
	for _, r := range s.Requests() {
		if r.Path == standInPaths[kind] {
			out = append(out, r.At)
		}
	}
	return out
}

// clients returns the addresses the calls came from.
func (s ironicStandIn) clients() []string {
	var out []string
	for _, r := range s.Requests() {
		out = append(out, r.From)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (s ironicStandIn) paths() []string {
	var out []string
	for _, r := range s.Requests() {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// netnsIPv6State is what the namespace's kernel knows of the link when a
// check fails: its IPv6 addresses (a tentative or failed one), neighbours
// (the guest's address FAILED or INCOMPLETE when the guest stopped
// answering neighbour solicitations), routes and TCP sockets with their
// retransmissions, each command's error in place of its output.
func netnsIPv6State(ctx context.Context, ns string) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"ip", "-n", ns, "-6", "addr"},
		{"ip", "-n", ns, "-6", "neigh"},
		{"ip", "-n", ns, "-6", "route"},
		{"ip", "netns", "exec", ns, "ss", "-tin"},
	} {
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "$ %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	return b.String()
}
