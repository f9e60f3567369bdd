package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/collector"
	ramdiskpkg "github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestVMCaptureFixture boots the ramdisk under SeaBIOS with
// `ironic-agent capture-fixture` (the way scripts/record-vm-fixture.sh
// records fixtures/qemu-bios), checks the live inventory against what QEMU
// was told, and checks that the uploaded tree reproduces it on the host.
// It needs no root.
func TestVMCaptureFixture(t *testing.T) {
	seriesIndependent(t) // no Ironic
	rd := ramdisk(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	uploads := make(chan []byte, 1)
	addr := serve(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case uploads <- b:
		default:
		}
	}))
	m := qemu.DefaultMachine(qemu.BIOS)
	m.Dir = vmDir(t)
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.GuestFwd = map[string]string{guestHost + ":80": addr}
	m.Append = "ironic_agent.cmd=capture-fixture,/run/fixture ironic_agent.upload=http://" + guestHost +
		"/upload ironic_agent.upload_dir=/run/fixture ironic_agent.dhcp=" + m.NICs[0].MAC
	vm := boot(t, ctx, m, qemu.Options{})
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	reportSeconds(t, vm.Elapsed(), "vm_run_s")
	reportSecondsTextLimit(t, uptimeAt(vm, logtext.Msg(rdinit.EventInit)), initUptimeFloor(qemu.BIOS), "init_uptime_s")
	reportAgentStarted(t, vm, "bios", "agent_started_uptime_s")
	var tgz []byte
	select {
	case tgz = <-uploads:
	default:
		t.Fatal("the guest powered off without uploading its fixture")
	}
	dir := filepath.Join(t.TempDir(), "fixture")
	if err := qemu.ExtractTarGz(bytes.NewReader(tgz), dir); err != nil {
		t.Fatal(err)
	}
	live, err := os.ReadFile(filepath.Join(dir, "inventory.json"))
	if err != nil {
		t.Fatal(err)
	}
	var inv map[string]any
	if err := json.Unmarshal(live, &inv); err != nil {
		t.Fatal(err)
	}
	checkInventory(t, inv, m)

	replayed, err := collector.Collect(ctx, collector.Options{Root: filepath.Join(dir, "root")})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := collector.WriteJSON(&got, replayed); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), live) {
		t.Errorf("the captured tree gives another inventory than the live VM:\nlive:\n%s\nreplayed:\n%s", live, got.Bytes())
	}
}

// TestVMDiscoveryUEFI is scenarios (a) and (b) under OVMF: an unknown VM
// boots the ramdisk, its agent posts the inventory to ironic-inspector,
// whose enroll hook creates the node and its ports; the stored inventory
// matches the VM's hardware, boot mode uefi, and the second NIC's LLDP
// neighbour is the lldpd the test runs.
func TestVMDiscoveryUEFI(t *testing.T) {
	rd := ramdisk(t)
	s := services(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	macs := newMACs(t)
	m := serviceMachine(t, rd, "uefi", newAgentPort(t), macs)
	lldp := lldpNeighbour(t, ctx, &m, "vm-lldp", "02:11:22:33:44:55", netbed.LLDPPeer{SystemName: "vm-switch-1",
		Description: "lldpd for the VM test", PortID: "Ethernet1/7", PortDescr: "vm switch port 7"})
	m.Append = s.inspectionArgs() + " ipa-collect-lldp=1 ipa-lldp-timeout=10 ironic_agent.dhcp=" + macs[0]

	start := time.Now()
	vm := boot(t, ctx, m, lldp)
	var port *ports.Port
	var err error
	for port == nil {
		if port, err = s.ironic.PortByAddress(ctx, macs[0]); err != nil {
			t.Fatal(err)
		}
		if port != nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no node with a port %s enrolled: %v", macs[0], ctx.Err())
		case <-time.After(time.Second):
		}
		if _, ok := vm.Find("reboot: Power down"); ok {
			t.Fatal("the VM powered off before it was enrolled")
		}
	}
	t.Cleanup(func() { _ = s.ironic.DeleteNode(context.Background(), port.NodeUUID) })
	enrolled := time.Since(start)
	data := s.inspectionData(t, ctx, port.NodeUUID, 2*time.Minute)
	reportSeconds(t, enrolled, "discovered_s")
	reportAgentStarted(t, vm, "uefi", "agent_started_uptime_s")
	if data["auto_discovered"] != true {
		t.Errorf("auto_discovered = %v, want true", data["auto_discovered"])
	}
	inv, _ := data["inventory"].(map[string]any)
	if inv == nil {
		t.Fatalf("introspection data has no inventory: %v", keys(data))
	}
	checkInventory(t, inv, m)
	if name, err := lldpSystemName(inv, macs[1]); err != nil || name != "vm-switch-1" {
		t.Errorf("LLDP system name on %s = %q (%v), want vm-switch-1", macs[1], name, err)
	}
	nics, err := s.ironic.Ports(ctx, ports.ListOpts{NodeUUID: port.NodeUUID})
	if err != nil {
		t.Fatal(err)
	}
	if len(nics) != 2 {
		t.Errorf("discovered node has %d ports, want 2 (both NICs): %+v", len(nics), nics)
	}
	if s.agentInspection() {
		// Ironic's local-link-connection hook, from the LLDP frames the
		// agent sent: the switch lldpd plays.
		for _, p := range nics {
			if p.Address != macs[1] {
				continue
			}
			llc := p.LocalLinkConnection
			if llc["switch_info"] != "vm-switch-1" || llc["port_id"] != "Ethernet1/7" || llc["switch_id"] == nil {
				t.Errorf("port %s local_link_connection = %v, want switch_info vm-switch-1, port_id Ethernet1/7 and a switch_id", p.Address, llc)
			}
		}
	}
}

// TestVMInspectCleanBIOS is scenarios (a) and (c) under SeaBIOS, the way a
// server goes through Ironic: an enrolled node is inspected (data checked
// against QEMU's hardware, boot mode bios), powered off, then booted again
// and cleaned (metadata at both ends of every disk zeroed, data in the
// middle kept).
func TestVMInspectCleanBIOS(t *testing.T) {
	rd := ramdisk(t)
	s := services(t)
	ctx, cancel := context.WithTimeout(t.Context(), 14*time.Minute)
	defer cancel()
	macs := newMACs(t)
	agentPort := newAgentPort(t)
	m := serviceMachine(t, rd, "bios", agentPort, macs)
	m.Append = s.inspectionArgs() + " ironic_agent.dhcp=" + macs[0]
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	// Something for cleaning to remove at both ends of every disk, and data
	// in the middle it must leave alone.
	for _, d := range m.Disks {
		p := m.DiskPath(d.ID)
		writeAt(t, p, 0, pattern(64<<10, 0xa5))
		writeAt(t, p, -(64 << 10), pattern(64<<10, 0xa5))
		writeAt(t, p, 16<<20, pattern(4096, 0x5a))
	}

	node := ironic.Enroll(t, ctx, s.ironic, ironic.NodeSpec{Name: "vm-bios", InspectInterface: s.inspectInterface(),
		Properties: map[string]any{"capabilities": "boot_mode:bios"}}, macs[:]...)

	// (a) inspection.
	l := kernelLifecycle(t, ctx, s.ironic, node.UUID, m)
	inspection := l.Inspect(5 * time.Minute)
	reportSeconds(t, inspection.Took, "inspection_s")
	reportAgentStarted(t, inspection.VM, "bios", "inspection_agent_started_uptime_s")
	checkInventory(t, inspectedInventory(t, ctx, s, node.UUID), m)

	// (c) automated cleaning: erase_devices_metadata (priority 99).
	// Inspector ends inspection by powering the node off; the fake power
	// interface cannot, so the driver stops that boot and boots the
	// ramdisk afresh, as Ironic's PXE boot would (no inspection callback).
	l.machine.Append = agentArgs(agentPort) + " ironic_agent.dhcp=" + macs[0]
	cleaning := l.Provide(6 * time.Minute)
	vm := cleaning.VM
	hb := "?"
	if l, ok := vm.Find(logtext.Msg(agent.EventHeartbeatSuccessful)); ok {
		hb = fmt.Sprintf("%.1fs", l.At.Seconds())
	}
	reportSecondsLimit(t, cleaning.Took, cleaningFloor(), "cleaning_s")
	reportFirstHeartbeat(t, "bios", hb, "cleaning_first_heartbeat_s")
	reportAgentStarted(t, vm, "bios", "cleaning_agent_started_uptime_s")
	// The disk files are read while QEMU has them open; stop it first.
	vm.Kill()
	for _, d := range m.Disks {
		p := m.DiskPath(d.ID)
		if b := readAt(t, p, 0, 64<<10); !bytes.Equal(b, make([]byte, 64<<10)) {
			t.Errorf("%s (%s): the start of the disk was not erased", d.ID, d.Serial)
		}
		if b := readAt(t, p, -(64 << 10), 64<<10); !bytes.Equal(b, make([]byte, 64<<10)) {
			t.Errorf("%s (%s): the end of the disk was not erased", d.ID, d.Serial)
		}
		if b := readAt(t, p, 16<<20, 4096); !bytes.Equal(b, pattern(4096, 0x5a)) {
			t.Errorf("%s (%s): data in the middle of the disk was changed by a metadata erase", d.ID, d.Serial)
		}
	}
}

// TestVMISOUEFI boots the virtual-media ISO (GRUB, built by ramdisk.ISO)
// under OVMF from a CD drive, with `ironic-agent inventory` as the
// ramdisk's command, and finds the machine's identity in what it printed.
// It needs no root.
func TestVMISOUEFI(t *testing.T) {
	seriesIndependent(t) // no Ironic
	rd := ramdisk(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	for _, p := range []string{"grub-mkrescue", "xorriso", "mformat"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (grub-common, grub-efi-amd64-bin, grub-pc-bin, xorriso, mtools; in test.sh)", p)
		}
	}
	m := qemu.DefaultMachine(qemu.UEFI)
	m.Dir = vmDir(t)
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.ISO = filepath.Join(m.Dir, ramdiskpkg.ISOName)
	if err := ramdiskpkg.ISO(ctx, rd.Kernel, rd.Initrd, "ironic_agent.cmd=inventory ironic_agent.dhcp=none", m.ISO); err != nil {
		t.Fatal(err)
	}
	vm := boot(t, ctx, m, qemu.Options{})
	if err := vm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	reportSeconds(t, vm.Elapsed(), "iso_boot_to_poweroff_s")
	reportAgentStarted(t, vm, "uefi", "agent_started_uptime_s")
	for _, want := range []string{`"product_name": "LabServer 9000 (LAB-SKU-1)"`, `"current_boot_mode": "uefi"`,
		`"serial": "LAB-NVME-0001"`, `boot_method=vmedia`, `status="exit 0"`} {
		if _, ok := vm.Find(want); !ok {
			t.Errorf("the console never showed %s", want)
		}
	}
}
