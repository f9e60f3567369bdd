package ramdisk_test

import (
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/netup"
	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestNTPInVM boots the agent ramdisk with ipa-ntp-server pointing at an
// SNTP server (this test, in a network namespace behind the VM's NIC) whose
// clock is an hour ahead. The agent in the guest steps the guest's clock:
// its log line saying so is stamped an hour later than this host's time.
// Then power_off, posted from the namespace, syncs again and writes the
// guest's RTC before the guest powers off. Only the guest's clocks change.
func TestNTPInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine")
	}
	netnstest.RequireRoot(t, "dnsmasq", "qemu-system-x86_64")
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := netnstest.ID(t)
	ns, err := netbed.NewNetns(ctx, "rdntp-"+id, "vmt"+id, "02:11:22:33:44:88", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	netnstest.Run(t, "ip", "-n", ns.Name, "addr", "add", "10.79.0.1/24", "dev", ns.Tap)
	dlog := netnstest.StartDnsmasq(t, ns.Name, ns.Tap, "--dhcp-range=10.79.0.50,10.79.0.60,2m", "--no-ping")
	conn := listenUDPIn(t, ns.Name, "10.79.0.1:123")
	const skew = time.Hour
	var answered atomic.Int64
	go serveSNTP(conn, skew, &answered)

	m := qemu.DefaultMachine("bios")
	m.Name = "ironic-agent-ntp"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.Disks = nil
	m.NICs = []qemu.NIC{{Model: "virtio-net-pci", MAC: "52:54:00:12:34:31", Backend: qemu.NICTap}}
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.Append = "ipa-standalone=1 ipa-ntp-server=10.79.0.1 ipa-disk-wait-attempts=0 ironic_agent.dhcp_timeout=30 ironic_agent.exit=poweroff"
	vm, err := qemu.Start(ctx, m, qemu.Options{Tap: ns.File})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	l, err := vm.WaitFor(ctx, logtext.Msg(agent.EventClockSetFromNTP))
	hostNow := time.Now()
	if err != nil {
		t.Fatalf("%v\n%s\ndnsmasq:\n%s", err, consoleTail(vm), dlog())
	}
	t.Logf("%d SNTP replies; %s", answered.Load(), strings.TrimSpace(l.Text))
	stamp := regexp.MustCompile(`time=(\S+)`).FindStringSubmatch(l.Text)
	if stamp == nil {
		t.Fatalf("no time= in %q", l.Text)
	}
	guest, err := time.Parse(time.RFC3339Nano, stamp[1])
	if err != nil {
		t.Fatalf("guest time %q: %v", stamp[1], err)
	}
	// The line reached us within seconds of being logged; the guest's
	// clock was the host's (QEMU's RTC) before the step.
	if d := guest.Sub(hostNow) - skew; d < -time.Minute || d > time.Minute {
		t.Errorf("guest logged at %v, host time %v: want the guest an hour ahead", guest, hostNow)
	}
	if !strings.Contains(l.Text, "offset=1h0m") && !strings.Contains(l.Text, "offset=59m59") {
		t.Errorf("offset not about an hour: %s", l.Text)
	}

	// power_off syncs again, writes the RTC (hwclock --systohc), and
	// powers off. The agent's API is reached from the namespace.
	if _, err := vm.WaitFor(ctx, logtext.Msg(agent.EventAPIListening)); err != nil {
		t.Fatalf("%v\n%s", err, consoleTail(vm))
	}
	lease, _ := vm.Find(logtext.Msg(netup.EventDHCPLease))
	guestIP := regexp.MustCompile(`address=(10\.79\.0\.\d+)`).FindStringSubmatch(lease.Text)
	if guestIP == nil {
		t.Fatalf("no lease address in %q", lease.Text)
	}
	api := &agentclient.Client{Base: "http://" + guestIP[1] + ":9999",
		HTTP: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: netbed.Dialer(ns.Name)}}}
	if r, err := api.Post(ctx, "standby.power_off", nil, false); err != nil || r.HTTPStatus/100 != 2 {
		t.Fatalf("standby.power_off from the namespace: %+v, %v", r, err)
	}
	if err := vm.Wait(ctx); err != nil {
		t.Fatalf("the guest did not power off: %v\n%s", err, consoleTail(vm))
	}
	t.Logf("VM ran %v; %d SNTP replies", vm.Elapsed().Round(time.Second), answered.Load())
	var steps int
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, logtext.Msg(agent.EventClockSetFromNTP)) {
			steps++
		}
		if strings.Contains(l.Text, "hardware clock") || strings.Contains(l.Text, "clock not set") {
			t.Errorf("guest: %s", l.Text)
		}
	}
	if steps != 2 {
		t.Errorf("%d clock steps, want 2 (start-up, power_off)\n%s", steps, consoleTail(vm))
	}
}

// listenUDPIn opens a UDP socket inside namespace ns (the socket stays
// there; netnstest's Do never gives the thread that entered it back).
func listenUDPIn(t *testing.T, ns, addr string) *net.UDPConn {
	t.Helper()
	var conn *net.UDPConn
	err := netnstest.Do(ns, func() error {
		ua, err := net.ResolveUDPAddr("udp4", addr)
		if err != nil {
			return err
		}
		conn, err = net.ListenUDP("udp4", ua)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// serveSNTP answers client requests as a stratum 2 server whose clock is
// skew ahead of this host's, until conn is closed.
func serveSNTP(conn *net.UDPConn, skew time.Duration, answered *atomic.Int64) {
	ntp := func(t time.Time) uint64 {
		d := t.Sub(time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC))
		return uint64(d/time.Second)<<32 | (uint64(d%time.Second)<<32)/1e9
	}
	buf := make([]byte, 512)
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		if n < 48 || buf[0]&7 != 3 {
			continue
		}
		now := time.Now().Add(skew)
		r := make([]byte, 48)
		r[0] = 4<<3 | 4 // version 4, server
		r[1] = 2
		copy(r[12:16], []byte{10, 79, 0, 1})
		binary.BigEndian.PutUint64(r[16:], ntp(now.Add(-time.Minute)))
		copy(r[24:32], buf[40:48]) // originate: the client's transmit
		binary.BigEndian.PutUint64(r[32:], ntp(now))
		binary.BigEndian.PutUint64(r[40:], ntp(time.Now().Add(skew)))
		if _, err := conn.WriteToUDPAddrPort(r, from); err == nil {
			answered.Add(1)
		}
	}
}
