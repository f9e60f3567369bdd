package vm

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/testbed/bmcsim"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestVMIPMIBIOS is the machine behind a BMC that Ironic drives: OpenIPMI's
// ipmi_sim holds the VM's power and boot device, Ironic's ipmi hardware
// type (ipmitool power and management, no fake interface, no vendor
// work-around) powers it on, reads the power state, sets the boot device,
// reboots it and powers it off; then an inspection, whose boot Ironic
// starts over IPMI, runs the agent, which reads the same BMC over KCS: the
// inventory's bmc_address and bmc_mac are the ipmi_address Ironic used and
// the BMC's MAC. Then automated cleaning, booted and powered off by Ironic
// over IPMI as well. Under SeaBIOS; the machine has no provisioning
// network, so a network boot hands QEMU the ramdisk's kernel directly
// (TestVMLifecycleBIOS boots it through Ironic's iPXE configuration).
func TestVMIPMIBIOS(t *testing.T) { ipmiLifecycle(t, "bios", 0) }

// TestVMIPMIUEFI is TestVMIPMIBIOS under OVMF: Ironic sets the boot device
// of a UEFI node with its raw Set System Boot Options (the EFI flag set).
// The second firmware of the scenario: a slow one.
func TestVMIPMIUEFI(t *testing.T) {
	slowScenario(t)
	ipmiLifecycle(t, "uefi", 1)
}

// ipmiLifecycle runs the scenario for firmware fw; n tells the tests'
// MACs, ports and BMC addresses apart. The BMC's LAN address is a loopback
// address other than 127.0.0.1 (all of 127/8 reaches lo without set-up),
// so an inventory that reported the host's own address would not pass.
func ipmiLifecycle(t *testing.T, fw string, n int) {
	rd := ramdisk(t)
	for _, p := range []string{"ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (Debian packages openipmi and ipmitool; in test.sh)", p)
		}
	}
	s := services(t)
	if !s.series.Host() {
		// Beside the default series' run, another series' costs more
		// minutes than ./test.sh has (docs/testing.md: Environment switches).
		slowScenario(t)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	macs := newMACs(t)
	agentPort := newAgentPort(t)
	m := serviceMachine(t, rd, fw, agentPort, macs)
	bmcAddress := fmt.Sprintf("127.95.40.%d", 1+n)
	m.BMC = &qemu.BMC{Kind: qemu.BMCOpenIPMI, MfgID: 0xc0de, ProductID: 0x0b0c,
		LANAddress: bmcAddress, LANPort: bmcLANPort + 2*n, LANMAC: fmt.Sprintf("02:00:00:95:40:%02x", 1+n),
		User: "ironic", Password: "ipmi-s3cret", VMPort: bmcVMPort + 2*n}
	// Under SeaBIOS a disk boot prints diskBootMarker: a boot sector on
	// every disk (cleaning wipes them later). OVMF boots no MBR code.
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	if fw == "bios" {
		for _, d := range m.Disks {
			writeAt(t, m.DiskPath(d.ID), 0, markerBootSector(t))
		}
	}
	testStart := time.Now()
	bmc := startBMC(t, ctx, m, qemu.Options{})

	images := serve(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/deploy.kernel":
			http.ServeFile(w, r, rd.KernelFor(m.Firmware))
		case "/deploy.initramfs":
			http.ServeFile(w, r, rd.InitrdFor(m.Firmware))
		default:
			http.NotFound(w, r)
		}
	}))
	driverInfo := map[string]any{
		"ipmi_address":  bmcAddress,
		"ipmi_port":     m.BMC.LANPort,
		"ipmi_username": m.BMC.User,
		"ipmi_password": m.BMC.Password,
		// ipmi_sim offers no SHA-256 cipher suite; ipmitool's default
		// (17) would cost every command about 9 s of probing first.
		"ipmi_cipher_suite": 3,
		// The pxe boot interface (the only kind the ipmi hardware type
		// takes, besides ipxe) fetches the ramdisk it would serve. Over
		// HTTP: Ironic 21.4.4 takes file:// URLs only below a few fixed
		// directories.
		"deploy_kernel":  "http://" + images + "/deploy.kernel",
		"deploy_ramdisk": "http://" + images + "/deploy.initramfs",
	}
	// enroll's "manage" makes Ironic validate the credentials and read the
	// power state over IPMI.
	node := ironic.Enroll(t, ctx, s.ironic, ironic.NodeSpec{Name: "vm-ipmi-" + fw, InspectInterface: s.inspectInterface(), IPMI: driverInfo,
		Properties: map[string]any{"capabilities": "boot_mode:" + fw, "vendor": nil}}, macs[:]...)
	if n, err := s.ironic.GetNode(ctx, node.UUID); err != nil || n.PowerState != "power off" {
		t.Fatalf("power state after manage: %+v, %v; want power off", n, err)
	}
	waitPower := func(want string) {
		t.Helper()
		if _, err := s.ironic.WaitFor(ctx, node.UUID, time.Minute, "power_state "+want, func(n *nodes.Node) bool {
			return n.PowerState == want && n.TargetPowerState == ""
		}); err != nil {
			t.Fatal(err)
		}
	}
	setPower := func(target nodes.TargetPowerState, want string) {
		t.Helper()
		start := time.Now()
		if err := nodes.ChangePowerState(ctx, s.ironic.Service, node.UUID, nodes.PowerStateOpts{Target: target}).ExtractErr(); err != nil {
			t.Fatalf("power %s: %v", target, err)
		}
		waitPower(want)
		reportSeconds(t, time.Since(start), "power_"+string(target)+"_s")
	}

	// The boot device Ironic sets is what the next power-on boots.
	if err := nodes.SetBootDevice(ctx, s.ironic.Service, node.UUID, nodes.BootDeviceOpts{BootDevice: "disk", Persistent: true}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if got := bmc.BootDevice(); got != bmcsim.BootDisk {
		t.Errorf("BMC boot device after Ironic set disk: %q", got)
	}
	var bd nodes.BootDeviceOpts
	if err := nodes.GetBootDevice(ctx, s.ironic.Service, node.UUID).ExtractInto(&bd); err != nil || bd.BootDevice != "disk" {
		t.Errorf("Ironic's boot device: %+v, %v; want disk", bd, err)
	}
	setPower(nodes.PowerOn, "power on")
	vm, err := bmc.WaitBoot(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(vm.Cmdline, "-kernel") {
		t.Errorf("a disk boot was handed a kernel: %s", qemu.ShellQuote(vm.Cmdline))
	}
	if fw == "bios" {
		lctx, lcancel := context.WithTimeout(ctx, time.Minute)
		_, err := vm.WaitFor(lctx, diskBootMarker)
		lcancel()
		if err != nil {
			t.Errorf("boot device disk: %v", err)
		}
	}
	setPower(nodes.Rebooting, "power on")
	if _, err := bmc.WaitBoot(ctx, 1); err != nil {
		t.Fatal(err)
	}
	setPower(nodes.PowerOff, "power off")
	if bmc.On() {
		t.Error("Ironic reports power off, the BMC's machine runs")
	}

	// Inspection: Ironic sets the boot device to pxe and powers the
	// machine on; ironic-inspector (or Ironic's agent inspect interface)
	// powers it off at the end. The network boot's stand-in gets what
	// Ironic's PXE configuration would give an inspection ramdisk.
	l := bmcLifecycle(t, ctx, s.ironic, node.UUID, ipmiPower, kernelBoot, bmc)
	l.machine.Append = s.inspectionArgs() + " ironic_agent.dhcp=" + macs[0]
	inspection := l.Inspect(6 * time.Minute)
	if got := bmc.BootDevice(); got != bmcsim.BootPXE {
		t.Errorf("BMC boot device for inspection: %q, want pxe", got)
	}
	reportSeconds(t, inspection.Took, "inspection_s")
	reportAgentStarted(t, inspection.VM, fw, "inspection_agent_started_uptime_s")
	l.WaitOff("inspection")
	inv := inspectedInventory(t, ctx, s, node.UUID)
	checkInventory(t, inv, m)
	stored, err := s.ironic.GetNode(ctx, node.UUID)
	if err != nil {
		t.Fatal(err)
	}
	used := stored.DriverInfo["ipmi_address"]
	if got := inv["bmc_address"]; got != used {
		t.Errorf("inventory bmc_address = %v, Ironic's ipmi_address = %v: want them equal", got, used)
	}
	if got := inv["bmc_mac"]; got != m.BMC.LANMAC {
		t.Errorf("inventory bmc_mac = %v, want the BMC's %s", got, m.BMC.LANMAC)
	}
	t.Logf("bmc_address %v, bmc_mac %v, bmc_v6address %v", inv["bmc_address"], inv["bmc_mac"], inv["bmc_v6address"])

	// Automated cleaning, booted by Ironic the same way; the agent looks
	// the node up and heartbeats, and Ironic powers the machine off when
	// the steps are done.
	l.machine.Append = agentArgs(agentPort) + " ironic_agent.dhcp=" + macs[0]
	cleaning := l.Provide(6 * time.Minute)
	l.WaitOff("cleaning")
	if cleaning.PowerOns != 1 || bmc.BootDevice() != bmcsim.BootPXE {
		t.Errorf("cleaning: %d power-ons, boot device %q; want 1 and pxe", cleaning.PowerOns, bmc.BootDevice())
	}
	hb := "?"
	if l, ok := cleaning.VM.Find(logtext.Msg(agent.EventHeartbeatSuccessful)); ok {
		hb = fmt.Sprintf("%.1fs", l.At.Seconds())
	}
	reportSeconds(t, cleaning.Took, "cleaning_s")
	reportFirstHeartbeat(t, fw, hb, "cleaning_first_heartbeat_s")
	t.Logf("BMC events: %s", strings.Join(bmc.Events(), "; "))
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}

// diskBootMarker is what markerBootSector prints on the serial port.
const diskBootMarker = "vmtest: booted from disk"

// markerBootSector is an MBR boot sector whose code writes diskBootMarker
// to COM1 and halts: proof that the firmware booted the disk.
func markerBootSector(t testing.TB) []byte {
	t.Helper()
	b, err := osimage.BootSector(diskBootMarker, 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
