package ramdisk_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/netup"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestVLANInVM boots the agent ramdisk with Metal3's
// ipa-enable-vlan-interfaces=all and ipa-collect-lldp=1 on a NIC whose
// switch port (netbed.Trunk) carries VLAN 100 tagged: lldpd on the
// native side announces VLAN 100, dnsmasq serves DHCP on VLAN 100 only.
// The init learns the VLAN, loads 8021q, creates eth0.100, takes a lease
// on it, and the inventory the guest prints lists eth0.100 with it.
func TestVLANInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine")
	}
	netnstest.RequireRoot(t, "lldpd", "dnsmasq", "qemu-system-x86_64")
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(rd.InitrdRaw)
	if err != nil {
		t.Fatalf("the uncompressed initramfs, to look for 8021q: %v", err)
	}
	if !bytes.Contains(raw, []byte("/8021q.ko")) {
		t.Skip("SKIPPED: the ramdisk carries no 8021q module (internal/ramdisk's module list), so the guest cannot tag")
	}
	for _, tc := range []struct {
		name, param string
		fromLLDP    bool
	}{
		{"all", "ipa-enable-vlan-interfaces=all ipa-collect-lldp=1 ipa-lldp-timeout=20", true},
		{"mac", "ipa-enable-vlan-interfaces=52:54:00:12:34:21.100", false},
	} {
		t.Run(tc.name, func(t *testing.T) { vlanVM(ctx, t, rd, tc.param, tc.fromLLDP) })
	}
}

// vlanVM is one boot of TestVLANInVM with the given kernel parameters.
func vlanVM(ctx context.Context, t *testing.T, rd *qemu.Ramdisk, param string, fromLLDP bool) {
	id := netnstest.ID(t)
	// Only lldpd's log goes here: vmtest keeps its socket and
	// configuration in a directory lldpd's own user can enter.
	dir := t.TempDir()
	native, err := netbed.NewNetns(ctx, "rdvmn-"+id, "vmn"+id, "02:11:22:33:44:66", filepath.Join(dir, "native"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(native.Close)
	tagged, err := netbed.NewNetns(ctx, "rdvmv-"+id, "vmv"+id, "02:11:22:33:44:77", filepath.Join(dir, "vlan"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tagged.Close)
	if err := native.StartLLDPD(ctx, netbed.LLDPPeer{SystemName: "vlan-switch", Description: "trunk", PortID: "Ethernet1/1",
		PortDescr: "to the VM", Extra: []string{"configure ports " + native.Tap + " lldp custom-tlv add oui 00,80,c2 subtype 3 oui-info " + vlanName(100, "provisioning")}}); err != nil {
		t.Fatal(err)
	}
	netnstest.Run(t, "ip", "-n", tagged.Name, "addr", "add", "10.78.0.1/24", "dev", tagged.Tap)
	// --no-ping: dnsmasq's 3 s ICMP check of an address before offering
	// it would be most of the lease's time.
	dlog := netnstest.StartDnsmasq(t, tagged.Name, tagged.Tap, "--dhcp-range=10.78.0.50,10.78.0.60,2m", "--no-ping")

	tr, qemuEnd, err := netbed.StartTrunk(native.File, tagged.File, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer qemuEnd.Close()
	t.Cleanup(tr.Close)

	m := qemu.DefaultMachine("bios")
	m.Name = "ironic-agent-vlan"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.Disks = nil
	m.NICs = []qemu.NIC{{Model: "virtio-net-pci", MAC: "52:54:00:12:34:21", Backend: qemu.NICStream}}
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	// net.ifnames=0: the checks name the NIC eth0 (TestNICNamesInVM
	// covers the predictable names).
	m.Append = param + " ironic_agent.cmd=inventory ironic_agent.exit=poweroff ironic_agent.dhcp_timeout=30 net.ifnames=0"
	vm, err := qemu.Start(ctx, m, qemu.Options{Tap: qemuEnd})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	qemuEnd.Close() // QEMU has its copy
	if err := vm.Wait(ctx); err != nil {
		t.Fatalf("%v\n%s", err, consoleTail(vm))
	}
	t.Logf("VM ran %v; %d tagged frames in, %d out, %d of other VLANs", vm.Elapsed().Round(time.Second),
		tr.TaggedIn.Load(), tr.TaggedOut.Load(), tr.OtherVLAN.Load())
	var module, learned, created, lease, inv string
	lines := vm.Lines()
	for i, l := range lines {
		switch {
		case strings.Contains(l.Text, logtext.Msg(netup.EventVLANModuleReady)), strings.Contains(l.Text, logtext.Msg(netup.EventVLANModule)+" "):
			module = l.Text
		case strings.Contains(l.Text, logtext.Msg(netup.EventVLANsFromLLDP)) && strings.Contains(l.Text, "link=eth0 "):
			learned = l.Text
		case strings.Contains(l.Text, logtext.Msg(netup.EventVLANInterfaceCreated)):
			created = l.Text
		case strings.Contains(l.Text, logtext.Msg(netup.EventDHCPLease)) && strings.Contains(l.Text, "link=eth0.100"):
			lease = l.Text
		case strings.Contains(l.Text, `"name": "eth0.100"`):
			// The inventory's interface object: its IPv4 address follows
			// the name and the MAC.
			for _, n := range lines[i:min(i+4, len(lines))] {
				if strings.Contains(n.Text, `"ipv4_address"`) {
					inv = n.Text
				}
			}
		}
	}
	for _, l := range []string{module, learned, created, lease, inv} {
		t.Logf("%s", strings.TrimSpace(l))
	}
	if !strings.Contains(module, "ready") || fromLLDP != strings.Contains(learned, "vlans=[100]") || !strings.Contains(created, "link=eth0.100") ||
		!strings.Contains(lease, "address=10.78.0.") || !strings.Contains(inv, `"10.78.0.`) {
		t.Errorf("want 8021q loaded, VLAN 100 learned, eth0.100 created with a lease from 10.78.0.0/24, and in the inventory with it:\n%s\ndnsmasq:\n%s", consoleTail(vm), dlog())
	}
}

func consoleTail(vm *qemu.VM) string {
	var b strings.Builder
	lines := vm.Lines()
	for _, l := range lines[max(0, len(lines)-80):] {
		b.WriteString(l.At.Round(time.Millisecond).String() + " " + l.Text + "\n")
	}
	return b.String()
}
