package vm

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/ipa"
	"github.com/ironic-go/ironic-agent/internal/testbed/ipa/ipadiff"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/metric"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// ipaOnce builds IPA 13's ramdisk once per test binary. The first build
// (debootstrap, the packages, Debian's own initramfs of the kernel) took
// over 30 minutes on a loaded machine.
var ipaOnce = sync.OnceValues(func() (*ipa.Ramdisk, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Minute)
	defer cancel()
	return ipa.Ensure(ctx)
})

// ipaRamdisk is IPA 13's ramdisk (internal/testbed/ipa), or a skip
// unless IPA_SIDE_BY_SIDE=1: the first build takes minutes.
func ipaRamdisk(t *testing.T) *ipa.Ramdisk {
	t.Helper()
	needQEMU(t)
	if !ipa.Enabled() {
		t.Skipf("SKIPPED: boots IPA 13's ramdisk beside ours (minutes to build once); set %s=1", ipa.EnableEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: building IPA's ramdisk needs root (debootstrap, chroot)")
	}
	rd, err := ipaOnce()
	if err != nil {
		t.Fatalf("build IPA's ramdisk: %v", err)
	}
	return rd
}

// sideAgent is one of the two ramdisks on the same machine.
type sideAgent struct {
	name           string // "ipa" or "ours"
	kernel, initrd string
	// kernelSize and initrdSize are the sizes a server downloads: the
	// bzImage and the compressed initramfs.
	kernelSize, initrdSize int64
	// unpackedSize is the initramfs uncompressed: what the kernel unpacks
	// into RAM.
	unpackedSize int64
	// heartbeatLine is what the agent logs once its first heartbeat is
	// done: ours "heartbeat successful"; IPA logs nothing on success and
	// "sleeping before next heartbeat" right after each one.
	heartbeatLine string
	// extra are the agent's own kernel parameters (ours: DHCP on the
	// first NIC only; IPA's image asks DHCP on every NIC itself).
	extra string
}

func sideAgents(t *testing.T, fw string, macs [2]string) []sideAgent {
	ipa := ipaRamdisk(t)
	ours := ramdisk(t)
	ipaInitrd := ipa.Initrd
	if fw == "bios" {
		ipaInitrd = ipa.InitrdRaw
	}
	return []sideAgent{
		// Each with its own NIC names: IPA's systemd-udev's predictable
		// names, ours computed by the init (internal/ramdisk/netnames);
		// what is keyed by name (lldp_raw, numa_topology's nics,
		// inspector's interfaces) compares only when they agree.
		{name: "ipa", kernel: ipa.Kernel, initrd: ipaInitrd, kernelSize: size(ipa.Kernel), initrdSize: size(ipa.Initrd), unpackedSize: size(ipa.InitrdRaw),
			heartbeatLine: "sleeping before next heartbeat"},
		{name: "ours", kernel: ours.KernelFor(qemu.Firmware(fw)), initrd: ours.InitrdFor(qemu.Firmware(fw)), kernelSize: size(ours.Kernel), initrdSize: size(ours.Initrd), unpackedSize: size(ours.InitrdRaw),
			extra: "ironic_agent.dhcp=" + macs[0], heartbeatLine: "heartbeat successful"},
	}
}

// sideRun is what one agent did on the machine.
type sideRun struct {
	data map[string]any
	// inspect is inspect -> manageable, QEMU started once Ironic waited.
	inspect time.Duration
	// heartbeat is QEMU start -> the agent's first heartbeat in the
	// cleaning boot (its console line), clean provide -> available
	// (metadata erase).
	heartbeat, clean time.Duration
}

// sideCollectors are the collectors both agents run: every one the
// comparison covers that IPA 13's image can run.
const sideCollectors = "default,logs,lldp,pci-devices,numa-topology,dmi-decode"

// inspectWith enrolls a node for m, inspects it with agent a, and returns
// the stored data. The LLDP neighbour is the lldpd in ns on the second NIC.
//
// With clean, the node is then cleaned (provide, metadata erase) in a
// second boot of the agent, for the numbers.
func inspectWith(t *testing.T, ctx context.Context, s *suite, a sideAgent, m qemu.Machine, ns *netbed.Netns, macs [2]string, agentPort int, clean bool) sideRun {
	t.Helper()
	m.Kernel, m.Initrd = a.kernel, a.initrd
	m.Dir = filepath.Join(vmDir(t), a.name)
	m.Append = strings.Join([]string{s.inspectionArgs(), "ipa-collect-lldp=1", "ipa-lldp-timeout=10",
		"ipa-inspection-collectors=" + sideCollectors, "BOOTIF=01-" + strings.ReplaceAll(macs[0], ":", "-"), a.extra}, " ")
	node := ironic.Enroll(t, ctx, s.ironic, ironic.NodeSpec{Name: "side-" + a.name + "-" + string(m.Firmware), InspectInterface: s.inspectInterface(),
		Properties: map[string]any{"capabilities": "boot_mode:" + m.Firmware}}, macs[:]...)
	// The other agent's node takes the same MACs.
	defer func() {
		if err := s.ironic.DeleteNode(ctx, node.UUID); err != nil {
			t.Errorf("delete node %s: %v", node.UUID, err)
		}
	}()
	l := kernelLifecycle(t, ctx, s.ironic, node.UUID, m)
	// The numbers time each boot from QEMU's start, which the driver makes
	// once Ironic waits for the ramdisk.
	var qemuStart time.Time
	l.options = func(*qemu.Machine) (qemu.Options, func()) {
		qemuStart = time.Now()
		return qemu.Options{Tap: ns.File}, nil
	}
	defer l.Stop()
	// IPA's ramdisk on the server-shaped machine took over ten minutes
	// from QEMU start to its inspection data under TCG on a loaded host.
	l.Inspect(20 * time.Minute)
	r := sideRun{inspect: time.Since(qemuStart)}
	r.data = s.inspectionData(t, ctx, node.UUID, time.Minute)
	l.Stop()
	if !clean {
		return r
	}
	if !s.series.TokenOnGET() {
		// IPA 13 requires the agent token on GET /v1/commands (IPA 12's
		// rule); Ironic 2023.1 polls without it, gets 401 and fails the
		// cleaning ("Node failed to check cleaning progress: 'commands'").
		t.Logf("%s: no cleaning against %s: IPA 13 needs an Ironic that sends the token on its GETs (2025.1 and later)", a.name, s.series)
		return r
	}
	// Automated cleaning (erase_devices_metadata, as TestVMInspectCleanBIOS)
	// in a fresh boot, as Ironic's PXE boot would.
	l.machine.Append = agentArgs(agentPort) + " " + a.extra
	st := l.Provide(10 * time.Minute)
	r.clean = st.Took
	if line, ok := st.VM.Find(a.heartbeatLine); ok {
		r.heartbeat = line.At
	}
	return r
}

// TestVMIPASideBySide boots IPA 13's ramdisk and ours on the same machine
// (every disk kind, two NICs, the second facing an lldpd, QEMU's SMBIOS
// values) under SeaBIOS and OVMF, inspects each through the same Ironic
// ($IRONIC_SERIES: ironic-inspector for 2023.1, Ironic's own inspection
// for 2026.1), and compares the stored data field by field. Every
// difference must be listed, with its reason, in
// testdata/ipa13-differences.json. Each agent names the NICs its own
// way (no net.ifnames=0): IPA's systemd-udev, our init; the names must
// be the same. IPA_SIDE_BY_SIDE=1 only.
func TestVMIPASideBySide(t *testing.T) {
	ipaRamdisk(t)
	for _, fw := range []string{"bios", "uefi"} {
		t.Run(fw, func(t *testing.T) {
			// The machine fixtures/qemu-ipa13-bios and qemu-ipa13-uefi record.
			sideBySide(t, qemu.SideBySideMachine(qemu.Firmware(fw)), nil, fw == "bios", "testdata/ipa13-differences.json")
		})
	}
}

// TestVMIPASideBySideServer is TestVMIPASideBySide's comparison on a
// machine shaped like a server (qemu.ServerMachine's controllers and
// NICs) under SeaBIOS, inspection only: disks behind an LSI MegaRAID SAS
// 2108, an LSI SAS 1068, VMware PVSCSI, USB sticks on xHCI and EHCI, IDE
// and NVMe; an onboard e1000e with an ACPI index (eno1), a vmxnet3 behind
// a root port, an e1000e facing the lldpd and the virtio NIC on the root
// bus (path names: enp2s0, enp0s12, enp0s11), and a BMC's USB NIC (its
// MAC name, enx...), each named by IPA's systemd-udev and by our init;
// both agents ask DHCP on every NIC. Differences beyond
// testdata/ipa13-differences.json's are in
// testdata/ipa13-server-differences.json, with their reasons; its last
// run's documents are testdata/ipa13-side-by-side/server-*.json.
// IPA_SIDE_BY_SIDE=1 and E2E_VM_SLOW=1: two more boots.
func TestVMIPASideBySideServer(t *testing.T) {
	slowScenario(t)
	ipaRamdisk(t)
	side := qemu.SideBySideMachine(qemu.BIOS)
	side.NICs[0].MAC, side.NICs[1].MAC = "52:54:00:1b:02:01", "52:54:00:1b:02:02"
	sideBySide(t, side, serverShape, false, "testdata/ipa13-differences.json", "testdata/ipa13-server-differences.json")
}

// serverNICs are the server machine's NICs beyond the two the node
// enrolls and the ones serverShape places itself: the BMC's USB NIC, as
// qemu.ServerMachine has it, on a slirp of its own.
var serverNICs = []qemu.NIC{
	{Model: qemu.NICUSB, MAC: "52:54:00:1b:02:04", Backend: qemu.NICIsolated},
}

// serverPlacedNICs are NICs where servers have them, each with the QEMU
// devices down to it: an onboard e1000e with an ACPI index in a root port
// (q35 gives the guest no ACPI index on the root bus: eno1), and a
// vmxnet3 card behind another root port (a path name, enp2s0, as our
// agent names it). The addresses stay clear of the harness's slots.
var serverPlacedNICs = []qemu.PlacedNIC{
	{MAC: "52:54:00:1b:02:05", Devices: []string{"pcie-root-port,id=rpon,bus=pcie.0,addr=0x10,chassis=10,slot=10", "e1000e,bus=rpon,acpi-index=1"}},
	{MAC: "52:54:00:1b:02:03", Devices: []string{"pcie-root-port,id=rpslot,bus=pcie.0,addr=0x11,chassis=11,slot=6", "vmxnet3,bus=rpslot"}},
}

// serverShape gives m qemu.ServerMachine's disks, keyboard and SSIF BMC,
// makes the NIC facing the lldpd an e1000e, and adds serverNICs and
// serverPlacedNICs, each on a slirp of its own.
func serverShape(m *qemu.Machine) {
	server := qemu.ServerMachine(m.Firmware)
	m.Name = server.Name
	m.Disks = server.Disks
	m.USBKeyboard, m.BMC = server.USBKeyboard, server.BMC
	m.NICs[1].Model = "e1000e"
	m.NICs = append(m.NICs, serverNICs...)
	m.AddPlacedNICs(serverPlacedNICs, 30)
}

// sideBySide inspects with IPA and with ours on side (its MACs and
// memory; shape, when set, changes the rest of the machine) and compares
// the two documents against the allow-lists; with clean, each agent
// also cleans the node in a second boot.
func sideBySide(t *testing.T, side qemu.Machine, shape func(*qemu.Machine), clean bool, allowLists ...string) {
	var allow []ipadiff.Allowed
	for _, f := range allowLists {
		a, err := ipadiff.LoadAllowList(f)
		if err != nil {
			t.Fatal(err)
		}
		allow = append(allow, a...)
	}
	s := services(t)
	fw := string(side.Firmware)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Minute)
	defer cancel()
	macs := [2]string{side.NICs[0].MAC, side.NICs[1].MAC}
	agentPort := newAgentPort(t)
	m := serviceMachine(t, ramdisk(t), fw, agentPort, macs)
	m.MemoryMB = side.MemoryMB
	if shape != nil {
		shape(&m)
	}
	ns, err := netbed.NewNetns(ctx, fmt.Sprintf("vm-ipa-%d", os.Getpid()), "vmlldp0", "02:11:22:33:44:56", filepath.Join(vmDir(t), "lldp"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	if err := ns.StartLLDPD(ctx, netbed.LLDPPeer{SystemName: "side-switch", Description: "lldpd for the side-by-side test",
		PortID: "Ethernet1/9", PortDescr: "side switch port 9"}); err != nil {
		t.Fatal(err)
	}
	m.NICs[1].Backend = qemu.NICTap
	runs := map[string]sideRun{}
	for _, a := range sideAgents(t, fw, macs) {
		if shape != nil && a.name == "ours" {
			// The server shape's further NICs are on slirps that answer
			// DHCP, which IPA's image asks on every NIC: ours does too
			// (its default), so both report the same addresses.
			a.extra = "ironic_agent.dhcp=all"
		}
		r := inspectWith(t, ctx, s, a, m, ns, macs, agentPort, clean)
		runs[a.name] = r
		line := fmt.Sprintf("numbers: %s %s: ramdisk %.1f MiB (kernel %.1f + initrd %.1f; %.0f MiB unpacked), inspection %.1fs (QEMU start to manageable)",
			fw, a.name, mib(a.kernelSize+a.initrdSize), mib(a.kernelSize), mib(a.initrdSize), mib(a.unpackedSize), r.inspect.Seconds())
		if r.clean != 0 {
			line += fmt.Sprintf(", first heartbeat %.1fs after QEMU start, cleaning %.1fs (provide to available)", r.heartbeat.Seconds(), r.clean.Seconds())
		}
		t.Log(line)
		reportSide(t, a.name, mib(a.kernelSize+a.initrdSize), "MiB", "ramdisk_mib")
		reportSide(t, a.name, r.inspect.Seconds(), "s", "inspection_s")
		if r.clean != 0 {
			reportSide(t, a.name, r.heartbeat.Seconds(), "s", "first_heartbeat_s")
			reportSide(t, a.name, r.clean.Seconds(), "s", "cleaning_s")
		}
	}
	compareSides(t, "", runs["ipa"].data, runs["ours"].data, allow, true)
	dumpSide(t, runs)
}

// compareSides checks the NIC names (checkSameNICNames) and compares IPA's
// document and ours against allow (ipadiff.Check), less the USB NIC of a
// gadgetRace, whose MACs differ and which checkSameNICNames logs.
func compareSides(t *testing.T, prefix string, ipaData, oursData map[string]any, allow []ipadiff.Allowed, logAllowed bool) map[string][]ipadiff.Difference {
	t.Helper()
	checkSameNICNames(t, ipaData, oursData)
	race := gadgetRace(ipaData, oursData)
	return ipadiff.Check(t, prefix, withoutNICs(ipaData, race), withoutNICs(oursData, race), allow, logAllowed)
}

// withoutNICs is data less the inventory's interfaces with one of macs.
func withoutNICs(data map[string]any, macs []string) map[string]any {
	if len(macs) == 0 {
		return data
	}
	inv, _ := data["inventory"].(map[string]any)
	ifaces, _ := inv["interfaces"].([]any)
	var kept []any
	for _, i := range ifaces {
		im, _ := i.(map[string]any)
		if mac, _ := im["mac_address"].(string); !slices.Contains(macs, strings.ToLower(mac)) {
			kept = append(kept, i)
		}
	}
	inv = maps.Clone(inv)
	inv["interfaces"] = kept
	data = maps.Clone(data)
	data["inventory"] = inv
	return data
}

// checkSameNICNames checks that both agents report every NIC, by MAC,
// under the same name, and that the names are predictable ones, not the
// kernel's ethN. The one exception is gadgetRace's.
func checkSameNICNames(t *testing.T, ipaData, oursData map[string]any) {
	t.Helper()
	ipaNames, ourNames := nicNames(ipaData), nicNames(oursData)
	if race := gadgetRace(ipaData, oursData); race != nil {
		t.Logf("the USB NIC: IPA's %s %s (cdc_subset), ours' %s %s (cdc_ether): not compared (see gadgetRace)", race[0], ipaNames[race[0]], race[1], ourNames[race[1]])
		delete(ipaNames, race[0])
		delete(ourNames, race[1])
	}
	if len(ipaNames) == 0 {
		t.Errorf("IPA's inventory has no interfaces")
	}
	for _, mac := range slices.Sorted(maps.Keys(ipaNames)) {
		in, on := ipaNames[mac], ourNames[mac]
		switch {
		case on == "":
			t.Errorf("NIC %s: IPA names it %s, ours does not report it", mac, in)
		case in != on:
			t.Errorf("NIC %s: IPA names it %s, ours %s", mac, in, on)
		case kernelNICName.MatchString(in):
			t.Errorf("NIC %s: both name it %s, the kernel's name: no predictable name", mac, in)
		default:
			t.Logf("NIC %s: %s in both", mac, in)
		}
	}
	for mac, on := range ourNames {
		if _, ok := ipaNames[mac]; !ok {
			t.Errorf("NIC %s: ours names it %s, IPA does not report it", mac, on)
		}
	}
}

// gadgetRace are the MACs of the server shape's USB NIC when IPA's ramdisk
// got it through cdc_subset: QEMU's usb-net carries the Linux USB
// Ethernet gadget's IDs (0525:a4a2), which both cdc_ether and cdc_subset
// match, and IPA's udev loads both, so either may bind first. Through
// cdc_ether (ours, whose init loads only it, and IPA's in some boots) the
// NIC has the device's MAC and its MAC name (enx...); through cdc_subset
// a MAC usbnet makes up and a path name (enp0s6u2i1). A real BMC's USB NIC
// has IDs only cdc_ether (or rndis_host) matches. The result is IPA's
// cdc_subset MAC and ours' cdc_ether MAC, or nothing.
func gadgetRace(ipaData, oursData map[string]any) []string {
	subset := nicsWithDriver(ipaData, "cdc_subset")
	if len(subset) != 1 {
		return nil
	}
	ether := nicsWithDriver(oursData, "cdc_ether")
	if len(ether) != 1 {
		return nil
	}
	if _, ok := nicNames(ipaData)[ether[0]]; ok {
		return nil
	}
	return []string{subset[0], ether[0]}
}

// nicsWithDriver are the MACs of the inventory's interfaces driven by
// driver.
func nicsWithDriver(data map[string]any, driver string) []string {
	inv, _ := data["inventory"].(map[string]any)
	ifaces, _ := inv["interfaces"].([]any)
	var macs []string
	for _, i := range ifaces {
		im, _ := i.(map[string]any)
		if d, _ := im["driver"].(string); d == driver {
			mac, _ := im["mac_address"].(string)
			macs = append(macs, strings.ToLower(mac))
		}
	}
	return macs
}

// kernelNICName is the kernel's own name of an Ethernet NIC.
var kernelNICName = regexp.MustCompile(`^eth[0-9]+$`)

// nicNames are the inventory's interface names by MAC.
func nicNames(data map[string]any) map[string]string {
	inv, _ := data["inventory"].(map[string]any)
	ifaces, _ := inv["interfaces"].([]any)
	names := map[string]string{}
	for _, i := range ifaces {
		im, _ := i.(map[string]any)
		mac, _ := im["mac_address"].(string)
		name, _ := im["name"].(string)
		if mac != "" {
			names[strings.ToLower(mac)] = name
		}
	}
	return names
}

// dumpSide writes both documents (less the logs tarball) next to the VM
// logs, for a look and for testdata/ipa13-side-by-side.
func dumpSide(t *testing.T, runs map[string]sideRun) {
	for name, r := range runs {
		if _, ok := r.data["logs"]; ok {
			r.data["logs"] = "<removed>"
		}
		p := filepath.Join(vmDir(t), name+"-inspection.json")
		if err := os.WriteFile(p, []byte(shortJSONIndent(r.data)), 0o644); err == nil {
			t.Logf("%s's stored data: %s", name, p)
		}
	}
}

func size(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// reportSide reports one agent's figure of a side-by-side run, named
// vm.<test>.<agent>.<figure...>; ours stands beside IPA's on the
// performance page.
func reportSide(t *testing.T, agent string, v float64, unit string, figure ...string) {
	t.Helper()
	var opts []metric.Option
	if agent == "ours" {
		opts = append(opts, metric.Beside(metricName(t, append([]string{"ipa"}, figure...)...)))
	}
	metric.Report(t, metricName(t, append([]string{agent}, figure...)...), v, unit, opts...)
}
