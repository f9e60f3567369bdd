package hw

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
	"github.com/ironic-go/ironic-agent/lldp"
)

// TestLLDPIntoEmulatedNIC runs `ironic-agent lldp` in the agent ramdisk in
// QEMU, whose e1000 NIC is a tap in a namespace with Debian's lldpd. Unlike
// a veth, QEMU's e1000 filters multicast by its multicast table, as real
// NICs do: the frames to 01:80:c2:00:00:0e only get through because the
// capture joins that group (the agent sets no promiscuous mode). The
// virtio NIC hears nothing and must say so.
func TestLLDPIntoEmulatedNIC(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine (1-3 minutes under TCG)")
	}
	netnstest.RequireRoot(t, "lldpd", "qemu-system-x86_64")
	ctx := t.Context()
	work := t.TempDir()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := netnstest.ID(t)
	// lldpd runs lldpcli on its configuration as its own unprivileged user,
	// which must reach the control socket: t.TempDir is 0700.
	nsDir, err := os.MkdirTemp("", "lldpvm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(nsDir) })
	if err := os.Chmod(nsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ns, err := netbed.NewNetns(ctx, "lldpvm-"+id, "lvt"+id, "02:11:22:33:44:55", nsDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	if err := ns.StartLLDPD(ctx, netbed.LLDPPeer{
		SystemName: "vm-test-switch", Description: "lldpd in " + ns.Name,
		PortID: "Ethernet7/7", PortDescr: "to the VM",
	}); err != nil {
		t.Fatal(err)
	}

	m := qemu.DefaultMachine(qemu.BIOS)
	m.Name = "ironic-agent-lldp"
	m.Dir = filepath.Join(work, "vm")
	m.Disks = nil
	m.NICs = []qemu.NIC{
		{Model: "virtio-net-pci", MAC: "52:54:00:12:34:01", Backend: qemu.NICIsolated},
		{Model: "e1000", MAC: "52:54:00:12:34:02", Backend: qemu.NICTap},
	}
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.Append = "ironic_agent.cmd=lldp,--format,table,--timeout,20s,--verbose ironic_agent.dhcp=none ironic_agent.exit=poweroff"
	vm, err := qemu.Start(ctx, m, qemu.Options{Tap: ns.File})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("VM ran %v", vm.Elapsed().Round(time.Second))

	var heard, silent, received string
	for _, l := range vm.Lines() {
		switch {
		case strings.Contains(l.Text, "vm-test-switch"):
			heard = l.Text
		case strings.Contains(l.Text, "(nothing heard)"):
			silent = l.Text
		case strings.Contains(l.Text, logtext.Msg(lldp.EventFrameReceived)):
			received = l.Text
		}
	}
	if heard == "" || !strings.Contains(heard, "Ethernet7/7") || !strings.Contains(heard, "02:11:22:33:44:55") {
		lldpdLog, _ := os.ReadFile(filepath.Join(nsDir, "lldpd.log"))
		t.Fatalf("no neighbour line with lldpd's system name, port and chassis; serial console:\n%s\nlldpd log:\n%s",
			consoleTail(vm), lldpdLog)
	}
	if silent == "" {
		t.Errorf("the virtio NIC, which has no neighbour, is not reported as silent:\n%s", consoleTail(vm))
	}
	t.Logf("neighbour: %s", strings.TrimSpace(heard))
	t.Logf("capture: %s", strings.TrimSpace(received))
}

func consoleTail(vm *qemu.VM) string {
	var b strings.Builder
	lines := vm.Lines()
	for _, l := range lines[max(0, len(lines)-50):] {
		fmt.Fprintf(&b, "%8.3f %s\n", l.At.Seconds(), l.Text)
	}
	return b.String()
}
