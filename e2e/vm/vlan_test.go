package vm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/netup"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestVMVLANInspectCleanDeploy is a tagged provisioning VLAN, as Metal3 and
// OpenStack run one: Ironic, ironic-inspector, the image server and
// dnsmasq in a network namespace, on 10.98.0.1, behind a switch port
// (netbed.BondSwitch with one port) that carries VLAN 100 tagged and
// nothing untagged. The guest is told ipa-enable-vlan-interfaces=MAC.100:
// its init makes eth0.100, takes its lease there (a reservation,
// 10.98.0.51), and the node goes through inspection, cleaning (Ironic
// calling the agent back on https://10.98.0.51:9999) and a deploy, every
// frame tagged.
func TestVMVLANInspectCleanDeploy(t *testing.T) {
	seriesIndependent(t) // its own Ironic is the host series
	rd, ctx, ns := lifecycleNetns(t, "ev")
	const host, guest, vid = "10.98.0.1", "10.98.0.51", 100
	macs := newMACs(t)
	netnstest.Run(t, "ip", "-n", ns.Name, "addr", "add", host+"/24", "dev", ns.Tap)
	netnstest.StartDnsmasq(t, ns.Name, ns.Tap, "--dhcp-range=10.98.0.50,10.98.0.60,10m", "--no-ping",
		"--dhcp-host="+macs[0]+","+guest)
	var switches []*netbed.BondSwitch
	netnsInspectCleanDeploy(t, ctx, rd, netnsScenario{
		name: "vlan", ns: ns, host: host, urlHost: host, macs: macs,
		nic:      qemu.NIC{Model: "virtio-net-pci", MAC: macs[0], Backend: qemu.NICStream},
		agentURL: "https://" + guest + ":9999",
		// net.ifnames=0: the checks name the VLAN link after the kernel's eth0.
		common: fmt.Sprintf(" ipa-enable-vlan-interfaces=%s.%d ipa-disk-wait-attempts=2 ironic_agent.dhcp_timeout=60 net.ifnames=0", macs[0], vid),
		boot: func(m *qemu.Machine) (qemu.Options, func()) {
			sw, ends, err := netbed.StartBondSwitch(1, ns.File, vid, false)
			if err != nil {
				t.Fatal(err)
			}
			switches = append(switches, sw)
			m.NICs[0].File = ends[0]
			// QEMU gets its copy at start; ours closes with the switch.
			return qemu.Options{}, func() { ends[0].Close(); sw.Close() }
		},
		inspected: func(t *testing.T, ifaces []map[string]any) {
			var got []string
			for _, i := range ifaces {
				got = append(got, fmt.Sprintf("%v=%v", i["name"], i["ipv4_address"]))
				if i["name"] == "eth0.100" && i["ipv4_address"] == guest {
					return
				}
			}
			t.Errorf("inventory interfaces %v: want eth0.100 with %s", got, guest)
		},
		cleaned: func(t *testing.T, vm *qemu.VM) {
			lease := ""
			for _, l := range vm.Lines() {
				if strings.Contains(l.Text, logtext.Msg(netup.EventDHCPLease)) && strings.Contains(l.Text, "link=eth0.100 ") {
					lease = l.Text
				}
			}
			if !strings.Contains(lease, "address="+guest) {
				t.Errorf("no DHCP lease on eth0.100 for %s in the guest's log: %q", guest, lease)
			}
			var in, out, dropped int64
			for _, sw := range switches {
				in, out, dropped = in+sw.FramesIn.Load(), out+sw.FramesOut.Load(), dropped+sw.Dropped.Load()
			}
			t.Logf("switch so far: %d tagged frames from the guest, %d to it, %d untagged or other VLANs dropped", in, out, dropped)
		},
	})
}
