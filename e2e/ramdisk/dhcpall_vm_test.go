package ramdisk_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/netup"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestInspectionDHCPAllInterfacesInVM boots the agent ramdisk with two
// NICs on two networks, each a namespace with its own dnsmasq, and
// ipa-inspection-dhcp-all-interfaces=1 as Metal3 sets it: inspection
// waits until every NIC has an IPv4 address, as IPA's
// inspector.wait_for_dhcp does.
//
//   - late: the second network's DHCP server starts only once the agent
//     says it waits for that NIC and the NIC's first DHCP window
//     (ironic_agent.dhcp_timeout=5) has passed, so the address comes from
//     the init's background attempts; the inspection data carries both
//     addresses.
//   - none: the second network never answers; at
//     ipa-inspection-dhcp-wait-timeout the agent names the NIC and
//     inspects anyway, and the inspection data carries the first NIC's
//     address and none for the second.
func TestInspectionDHCPAllInterfacesInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots virtual machines")
	}
	netnstest.RequireRoot(t, "dnsmasq", "qemu-system-x86_64")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("late", func(t *testing.T) { dhcpAllVM(ctx, t, rd, true) })
	t.Run("none", func(t *testing.T) { dhcpAllVM(ctx, t, rd, false) })
}

func dhcpAllVM(ctx context.Context, t *testing.T, rd *qemu.Ramdisk, lateServer bool) {
	id := netnstest.ID(t)
	first, err := netbed.NewNetns(ctx, "rdda-"+id, "vmda"+id, "02:11:22:33:44:c1", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.Close)
	second, err := netbed.NewNetns(ctx, "rddb-"+id, "vmdb"+id, "02:11:22:33:44:c2", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Close)
	netnstest.Run(t, "ip", "-n", first.Name, "addr", "add", "10.91.0.1/24", "dev", first.Tap)
	netnstest.Run(t, "ip", "-n", second.Name, "addr", "add", "10.92.0.1/24", "dev", second.Tap)
	// --no-ping: dnsmasq's 3 s ICMP check of an address before offering it.
	dlogFirst := netnstest.StartDnsmasq(t, first.Name, first.Tap, "--dhcp-range=10.91.0.50,10.91.0.60,2m", "--no-ping")
	standIn := startIronicStandIn(t, first.Name, "10.91.0.1")

	const macFirst, macSecond = "52:54:00:12:34:91", "52:54:00:12:34:92"
	wait := "20"
	if lateServer {
		wait = "600"
	}
	m := qemu.DefaultMachine("bios")
	m.Name = "ironic-agent-dhcpall"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.MemoryMB = 768
	m.Disks = nil
	m.NICs = []qemu.NIC{
		{Model: "virtio-net-pci", MAC: macFirst, Backend: qemu.NICTap, File: first.File},
		{Model: "virtio-net-pci", MAC: macSecond, Backend: qemu.NICTap, File: second.File},
	}
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.Append = "ipa-api-url=http://10.91.0.1:6385 ipa-inspection-callback-url=http://10.91.0.1:5050/v1/continue" +
		" ipa-inspection-dhcp-all-interfaces=1 ipa-inspection-dhcp-wait-timeout=" + wait +
		" ironic_agent.dhcp_timeout=5 ironic_agent.ipv6=0 ipa-disk-wait-attempts=0 ironic_agent.exit=poweroff"
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	dlogSecond := func() string { return "(not started)" }
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\n%s\ndnsmasq (first):\n%s\ndnsmasq (second):\n%s\nstand-in saw %v", fmt.Sprintf(format, args...),
			consoleTail(vm), dlogFirst(), dlogSecond(), standIn.paths())
	}
	waiting, err := vm.WaitFor(ctx, logtext.Msg(agent.EventWaitingForDHCP))
	if err != nil {
		fail("the agent did not wait for DHCP: %v", err)
	}
	t.Logf("%s", waiting.Text)
	if lateServer {
		// Only after the NIC's first window: its address must come
		// from the init's background attempts.
		if _, err := vm.WaitFor(ctx, logtext.Msg(netup.EventDHCPRetrying)); err != nil {
			fail("the second NIC's first DHCP window did not end: %v", err)
		}
		dlogSecond = netnstest.StartDnsmasq(t, second.Name, second.Tap, "--dhcp-range=10.92.0.50,10.92.0.60,2m", "--no-ping")
	}
	body, err := standIn.wait(ctx, "continue", 5*time.Minute)
	if err != nil {
		fail("no inspection data: %v", err)
	}
	nics, err := inventoryNICs(body)
	if err != nil {
		fail("%v", err)
	}
	got := map[string]string{}
	var secondName string
	for _, i := range nics {
		got[i.MAC] = deref(i.IPv4Address)
		if i.MAC == macSecond {
			secondName = i.Name
		}
	}
	t.Logf("inspected addresses: %v", got)
	if !strings.Contains(waiting.Text, "interfaces=["+secondName+"]") {
		fail("the wait named %q, want the second NIC %s alone", waiting.Text, secondName)
	}
	if !strings.HasPrefix(got[macFirst], "10.91.0.") {
		fail("the first NIC was inspected with %s, want its lease from 10.91.0.0/24", got[macFirst])
	}
	if lateServer {
		if !strings.HasPrefix(got[macSecond], "10.92.0.") {
			fail("the second NIC was inspected with %s, want its late lease from 10.92.0.0/24", got[macSecond])
		}
		if _, ok := vm.Find(logtext.Msg(agent.EventDHCPAddressesReady)); !ok {
			fail("no %q line", agent.EventDHCPAddressesReady)
		}
		return
	}
	if got[macSecond] != "null" {
		fail("the second NIC was inspected with %s, want no IPv4 address", got[macSecond])
	}
	timedOut, ok := vm.Find(logtext.Msg(agent.EventDHCPWaitTimedOut))
	if !ok || !strings.Contains(timedOut.Text, "interfaces=["+secondName+"]") {
		fail("want the timeout line naming %s, got %q", secondName, timedOut.Text)
	}
}
