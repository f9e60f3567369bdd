package vm

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/netup"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestVMIPv6InspectCleanDeploy is the IPv6-only provisioning network: Ironic and
// ironic-inspector run inside a network namespace, listening on an IPv6
// address of it only (fd00:7c::1), with dnsmasq sending router
// advertisements (M flag) and serving stateful DHCPv6 there; the guest's
// only NIC is a tap in that namespace, so everything between the agent and
// Ironic goes over IPv6. An enrolled node is inspected (the agent posts to
// http://[fd00:7c::1]:5050/v1/continue; the inventory's ipv6_address is
// the reserved DHCPv6 address) and then cleaned (lookup and heartbeats to
// http://[fd00:7c::1]:6385, Ironic calling the agent back on
// https://[fd00:7c::51]:9999 with the auto-TLS certificate whose IP SAN is
// that address, erase_devices_metadata) until the node is available, and
// deployed (a raw image from http://[fd00:7c::1]:8080, written to the
// disk; Ironic has the agent power the VM off).
func TestVMIPv6InspectCleanDeploy(t *testing.T) {
	seriesIndependent(t) // its own Ironic is the host series
	rd, ctx, ns := lifecycleNetns(t, "e6")
	const host, guest = "fd00:7c::1", "fd00:7c::51"
	macs := newMACs(t)
	netnstest.Run(t, "ip", "-n", ns.Name, "-6", "addr", "add", host+"/64", "dev", ns.Tap, "nodad")
	netnstest.StartDnsmasq(t, ns.Name, ns.Tap, "--enable-ra", "--dhcp-range=fd00:7c::10,fd00:7c::20,64,10m",
		"--dhcp-host=id:00:03:00:01:"+macs[0]+",["+guest+"]")

	netnsInspectCleanDeploy(t, ctx, rd, netnsScenario{
		name: "ipv6", ns: ns, host: host, urlHost: "[" + host + "]", macs: macs,
		nic:      qemu.NIC{Model: "virtio-net-pci", MAC: macs[0], Backend: qemu.NICTap},
		agentURL: "https://[" + guest + "]:9999", common: " ipa-disk-wait-attempts=2 ironic_agent.dhcp_timeout=60",
		boot: func(*qemu.Machine) (qemu.Options, func()) { return qemu.Options{Tap: ns.File}, func() {} },
		inspected: func(t *testing.T, ifaces []map[string]any) {
			var v6 any = "no interface " + macs[0]
			for _, i := range ifaces {
				if i["mac_address"] == macs[0] {
					v6 = i["ipv6_address"]
				}
			}
			if v6 != guest {
				t.Errorf("inventory ipv6_address %v, want %s", v6, guest)
			}
		},
		cleaned: func(t *testing.T, vm *qemu.VM) {
			if l, ok := vm.Find(logtext.Msg(netup.EventDHCPv6Lease)); !ok || !strings.Contains(l.Text, "address="+guest) {
				t.Errorf("no DHCPv6 lease for %s in the guest's log: %q", guest, l.Text)
			}
		},
	})
}

// lifecycleNetns is the start of a netnsInspectCleanDeploy test: the ramdisk, a
// context of 15 minutes, Ironic's packages, and a namespace (named after
// prefix) with a tap for the VM.
func lifecycleNetns(t *testing.T, prefix string) (*qemu.Ramdisk, context.Context, *netbed.Netns) {
	t.Helper()
	rd := ramdisk(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: Ironic, ironic-inspector and dnsmasq in a network namespace")
	}
	netnstest.RequireRoot(t, "dnsmasq")
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	t.Cleanup(cancel)
	if _, err := ironic.EnsurePackages(ctx); err != nil {
		t.Fatal(err)
	}
	id := netnstest.ID(t)
	ns, err := netbed.NewNetns(ctx, prefix+"-"+id, prefix+"t"+id, "02:11:22:33:44:aa", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	return rd, ctx, ns
}

// netnsScenario is one run of netnsInspectCleanDeploy: a provisioning
// network in a namespace the test made, reached by the guest through
// boot's options.
type netnsScenario struct {
	name string // of the node and the machine
	ns   *netbed.Netns
	// host is the namespace's address Ironic, inspector and the image
	// server listen on; urlHost is host as a URL has it.
	host, urlHost string
	macs          [2]string // the node's ports; macs[0] is the guest's NIC
	nic           qemu.NIC
	agentURL      string // Ironic's agent_url while cleaning
	common        string // kernel parameters of every boot
	// boot gives the options of one boot (the tap, or a switch's end in
	// nic.File) and what to do once the VM is gone.
	boot func(m *qemu.Machine) (qemu.Options, func())
	// inspected checks the inventory's interfaces; cleaned the cleaning
	// boot's console.
	inspected func(t *testing.T, ifaces []map[string]any)
	cleaned   func(t *testing.T, vm *qemu.VM)
}

// netnsInspectCleanDeploy runs Ironic and ironic-inspector in lc.ns, listening
// on lc.host only, enrolls a node, and takes it through inspection,
// cleaning (lookup, heartbeats, Ironic calling the agent back,
// erase_devices_metadata) and a deploy of a raw image served from the
// namespace, one VM boot each, checking what went over the network.
func netnsInspectCleanDeploy(t *testing.T, ctx context.Context, rd *qemu.Ramdisk, lc netnsScenario) {
	t.Helper()
	dial := func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		err = netnstest.Do(lc.ns.Name, func() error {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	svc := ironic.StartForTest(t, ctx, ironic.Config{Dir: filepath.Join(theSuite.dir, "services-"+lc.name), Netns: lc.ns.Name, Host: lc.host, Dial: dial})
	t.Logf("Ironic and ironic-inspector up in the namespace at %s, %s", svc.IronicURL, svc.InspectorURL)
	reportSeconds(t, svc.Took, lc.name, "services_up_s")
	client, inspector := svc.Ironic, svc.Inspector

	m := qemu.DefaultMachine(qemu.BIOS)
	m.Name = "ironic-agent-" + lc.name
	m.Dir = vmDir(t)
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.MemoryMB = 1024
	// One disk: the agent waits for a root disk of 4 GiB (sparse).
	m.Disks = []qemu.Disk{{ID: "vblk", Kind: qemu.DiskVirtioBlk, SizeMB: 5 << 10, Serial: "LAB-VBLK-0601"}}
	m.NICs = []qemu.NIC{lc.nic}
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	// Something for cleaning's metadata erase to remove.
	disk := m.DiskPath("vblk")
	writeAt(t, disk, 0, pattern(64<<10, 0xa5))
	base := "http://" + lc.urlHost

	node := ironic.Enroll(t, ctx, client, ironic.NodeSpec{Name: "vm-" + lc.name, InspectInterface: "inspector",
		Properties: map[string]any{"capabilities": "boot_mode:bios"}}, lc.macs[:]...)
	// One boot at a time: what the last one left (a switch reading the
	// namespace's tap) goes before the next boot's is made.
	l := kernelLifecycle(t, ctx, client, node.UUID, m)
	l.options = lc.boot
	t.Cleanup(l.Stop)

	// Inspection.
	l.machine.Append = "ipa-inspection-callback-url=" + base + ":5050/v1/continue" + lc.common
	inspection := l.Inspect(5 * time.Minute)
	reportSeconds(t, inspection.Took, lc.name, "inspection_s")
	reportAgentStarted(t, inspection.VM, "bios", lc.name, "inspection_agent_started_uptime_s")
	data, err := inspector.Data(ctx, node.UUID)
	if err != nil {
		t.Fatal(err)
	}
	inv, _ := data["inventory"].(map[string]any)
	list, _ := inv["interfaces"].([]any)
	var ifaces []map[string]any
	for _, i := range list {
		if im, ok := i.(map[string]any); ok {
			ifaces = append(ifaces, im)
		}
	}
	lc.inspected(t, ifaces)

	// Cleaning: lookup, heartbeats, Ironic calling the agent back.
	l.machine.Append = "ipa-api-url=" + base + ":6385" + lc.common
	// Ironic keeps the callback URL of the heartbeats while cleaning and
	// forgets it at the end.
	start := time.Now()
	vm := l.Start(nodes.ProvisionStateOpts{Target: nodes.TargetProvide})
	agentURL := ""
	if _, err := client.WaitFor(ctx, node.UUID, 5*time.Minute, "an agent_url", func(n *nodes.Node) bool {
		agentURL, _ = n.DriverInternalInfo["agent_url"].(string)
		return agentURL != "" || n.ProvisionState == "available"
	}); err != nil {
		t.Fatal(err)
	}
	if agentURL != lc.agentURL {
		t.Errorf("Ironic's agent_url %q, want %s", agentURL, lc.agentURL)
	}
	l.Wait("available", 6*time.Minute)
	hb := "?"
	if l, ok := vm.Find(logtext.Msg(agent.EventHeartbeatSuccessful)); ok {
		hb = l.At.Round(100 * time.Millisecond).String()
	}
	reportSeconds(t, time.Since(start), lc.name, "cleaning_s")
	reportFirstHeartbeat(t, "bios", hb, lc.name, "cleaning_first_heartbeat_s")
	lc.cleaned(t, vm)
	vm.Kill()
	if b := readAt(t, disk, 0, 64<<10); !bytes.Equal(b, make([]byte, 64<<10)) {
		t.Errorf("the start of the disk was not erased: cleaning did not run its steps through the agent")
	}
	t.Logf("Ironic called the agent back at %s", agentURL)

	// Deploy: the image from an HTTP server on the namespace's address
	// (Ironic checks the URL from there too), written to the disk.
	img := mbrImage()
	var ln net.Listener
	if err := netnstest.Do(lc.ns.Name, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(lc.host, "8080"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	imgSrv := &http.Server{ReadHeaderTimeout: 30 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(img))
	})}
	go func() { _ = imgSrv.Serve(ln) }()
	t.Cleanup(func() { _ = imgSrv.Close() })
	// At the end of a BIOS deploy Ironic sets the boot device to disk,
	// which the fake management interface refuses.
	ops := append(imageInfo(base+":8080/image.raw", img),
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/management_interface", Value: "noop"})
	if err := nodes.Update(ctx, client.Service, node.UUID, ops).Err; err != nil {
		t.Fatal(err)
	}
	deploy := l.Deploy(6 * time.Minute)
	reportSeconds(t, deploy.Took, lc.name, "deploy_s")
	// Ironic ends the deploy by asking the agent to power off.
	if err := deploy.VM.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readAt(t, disk, 0, len(img)); !bytes.Equal(got, img) {
		t.Errorf("the disk does not hold the image")
	}
}
