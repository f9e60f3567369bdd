package vm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/deploy/mkfs"
	"github.com/ironic-go/ironic-agent/e2e/metal3hw"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// metal3AgentPort is the hostfwd to the agent API of TestVMMetal3Lifecycle,
// moved by $E2E_PORT_OFFSET with the package's other ports.
var metal3AgentPort = portOffset() + 9550

// The FAT partition of the Metal3 test's whole-disk image: partition 1,
// 8 MiB at 1 MiB, where the service step inject_files writes.
const (
	metal3FATStart = 1 << 20
	metal3FATSize  = 8 << 20
	metal3Injected = "/metal3/injected.txt"
)

// TestVMMetal3Lifecycle takes one VM through what Metal3's
// baremetal-operator asks of Ironic 2026.1 (and 2025.1), one ramdisk boot
// per operation (no fast track), under SeaBIOS:
//
//  1. inspection with Ironic's agent inspect interface and LLDP from an
//     lldpd neighbour; what Ironic stored (GET /v1/nodes/{node}/inventory)
//     goes through baremetal-operator's own conversion into
//     HardwareDetails (package metal3hw), checked against the VM;
//  2. a whole-disk deploy with a config drive built by Ironic from
//     meta_data, user_data and network_data, as Metal3 sends it, on a node
//     with disable_power_off: Ironic ends the deploy with system.lockdown
//     instead of a power-off; the config drive partition is read back from
//     the disk file;
//  3. servicing the active node (the service verb) with two in-band
//     service steps, burnin_cpu and inject_files; the node returns to
//     active and the injected file is on the image's FAT partition.
//     Ironic 35.0.1 (29.0.5, upstream master) means to lock the agent
//     down at the end of servicing too (tear_down_service with
//     disable_power_off), but it wipes the node's agent_url first
//     (_tear_down_node_service), so it logs "Agent is already down" and
//     sends nothing, whatever the ramdisk; the test does not count on
//     that lockdown. On 2025.1 (Ironic 29.0) the test stops before
//     servicing: that Ironic refuses lookups in "service wait".
//
// 98-103 s with -race at load 10-12 (inspection 30-31 s, deploy 24-30 s,
// service 35-40 s) on 2026.1, 185 s at load 16-18; 94 s on 2025.1.
func TestVMMetal3Lifecycle(t *testing.T) {
	rd := ramdisk(t)
	s := services(t)
	if !s.series.HasAgentInspection() {
		t.Skipf("SKIPPED: needs IRONIC_SERIES=2025.1 or 2026.1 (built-in inspection; disable_power_off is API 1.95); the series is %s", s.series)
	}
	for _, p := range []string{"xorriso", "mtype"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (xorriso, mtools; in test.sh) to read the config drive and the injected file", p)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	begin := time.Now()
	// Service (1.87) and disable_power_off (1.95) need a newer microversion
	// than the suite's client speaks.
	sc := *s.ironic.Service
	sc.Microversion = "1.95"
	api := &sc

	macs := [2]string{"52:54:00:6d:0a:01", "52:54:00:6d:0a:02"}
	m := serviceMachine(t, rd, "bios", metal3AgentPort, macs)
	lldp := lldpNeighbour(t, ctx, &m, "vm-m3", "02:11:22:33:44:66", netbed.LLDPPeer{SystemName: "metal3-switch-1",
		Description: "lldpd for the Metal3 test", PortID: "Ethernet1/9", PortDescr: "metal3 switch port 9"})
	// BOOTIF as a PXE boot gives it: the inventory's boot.pxe_interface,
	// which Ironic turns into pxe_enabled and Metal3 into the NIC's PXE.
	bootif := "BOOTIF=01-" + strings.ReplaceAll(macs[0], ":", "-")
	noClean := false
	// Ironic's own inspection, as Metal3 runs it, also where the series
	// still has ironic-inspector (2025.1).
	node := ironic.Enroll(t, ctx, s.ironic, ironic.NodeSpec{Name: "vm-metal3", InspectInterface: "agent", AutomatedClean: &noClean,
		Properties: map[string]any{"capabilities": "boot_mode:bios"}}, macs[:]...)

	// 1. Inspection.
	m.Append = "ipa-inspection-callback-url=http://" + guestHost + ":" + strconv.Itoa(ironicPort) + "/v1/continue_inspection" +
		" ipa-collect-lldp=1 ipa-lldp-timeout=10 " + bootif + " ironic_agent.dhcp=" + macs[0]
	l := kernelLifecycle(t, ctx, s.ironic, node.UUID, m)
	l.options = func(*qemu.Machine) (qemu.Options, func()) { return lldp, nil }
	inspection := l.Inspect(5 * time.Minute)
	reportSeconds(t, inspection.Took, "inspection_s")
	reportAgentStarted(t, inspection.VM, "bios", "inspection_agent_started_uptime_s")
	l.Stop()
	inv := nodes.GetInventory(ctx, api, node.UUID)
	if inv.Err != nil {
		t.Fatalf("GET /v1/nodes/%s/inventory: %v", node.UUID, inv.Err)
	}
	if raw, err := json.MarshalIndent(inv.Body, "", "  "); err == nil {
		// Kept with E2E_KEEP=1: metal3hw's testdata is such a record.
		_ = os.WriteFile(filepath.Join(m.Dir, "inventory-response.json"), raw, 0o644)
	}
	data, err := inv.Extract()
	if err != nil {
		t.Fatalf("decode the stored inventory with gophercloud: %v", err)
	}
	details := metal3hw.GetHardwareDetails(data, testLogger{t})
	checkHardwareDetails(t, details, m, macs, bootif != "")

	// 2. Deploy with a config drive, disable_power_off set.
	fatImg := metal3Image(t)
	imgAddr := serve(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(fatImg))
	}))
	l.machine.GuestFwd[guestHost+":80"] = imgAddr
	ops := append(imageInfo("http://"+imgAddr+"/image.raw", fatImg),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"serial": deployTarget}},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/image_http_proxy", Value: "http://" + guestHost + ":80"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/agent_burnin_cpu_timeout", Value: "2"},
		// At the end of a BIOS deploy Ironic sets the boot device to disk,
		// which the fake management interface refuses; noop accepts it.
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/management_interface", Value: "noop"},
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/disable_power_off", Value: true},
	)
	if err := nodes.Update(ctx, api, node.UUID, ops).Err; err != nil {
		t.Fatal(err)
	}
	l.Change(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, time.Minute)
	cd := metal3ConfigDrive(node.UUID)
	l.machine.Append = agentArgs(metal3AgentPort) + " ironic_agent.dhcp=" + macs[0]
	deploy := l.To(nodes.ProvisionStateOpts{Target: nodes.TargetActive, ConfigDrive: cd}, 8*time.Minute)
	vm := deploy.VM
	reportSeconds(t, deploy.Took, "deploy_s")
	// Ironic locked the agent down instead of powering the VM off: the VM
	// still runs, its agent said so and answers no more.
	if _, ok := vm.Find("reboot: Power down"); ok {
		t.Error("the VM powered off at the end of a deploy with disable_power_off")
	}
	// Ironic takes the agent's API going away as the end of the deploy;
	// the agent logs the lockdown only after that, once every NIC is
	// down, so the line may still be on its way.
	lockedCtx, lockedCancel := context.WithTimeout(ctx, time.Minute)
	if _, err := vm.WaitFor(lockedCtx, logtext.Msg(agent.EventLockedDown)); err != nil {
		t.Errorf("the agent never logged that it locked the system down: %v", err)
	}
	lockedCancel()
	if n, err := s.ironic.GetNode(ctx, node.UUID); err != nil {
		t.Fatal(err)
	} else if n.PowerState != "power on" {
		t.Errorf("power state after the locked-down deploy = %q, want power on", n.PowerState)
	}
	vm.Kill()
	disk := m.DiskPath(deployTargetID(t, m))
	if got := readAt(t, disk, 0, 446); !bytes.Equal(got, fatImg[:446]) {
		t.Errorf("%s does not start with the image's boot code", disk)
	}
	if got := readAt(t, disk, metal3FATStart, 4096); !bytes.Equal(got, fatImg[metal3FATStart:metal3FATStart+4096]) {
		t.Errorf("%s does not hold the image's FAT partition", disk)
	}
	checkConfigDrive(t, disk, cd)

	// 3. Service steps on the active node.
	if s.series == ironic.Series2025_1 {
		// Ironic 29.0 refuses a ramdisk's lookup in "service wait"
		// (LOOKUP_ALLOWED_STATES lacks it; upstream commit a23b7eeef
		// added it for 2025.2), so no agent, IPA's included, can serve
		// in-band service steps without fast track.
		t.Log("servicing not tried: Ironic 29.0 refuses lookups in service wait")
		reportSeconds(t, time.Since(begin), "whole_test_s")
		return
	}
	content := "written by inject_files in servicing, node " + node.UUID + "\n"
	steps := []nodes.ServiceStep{
		{Interface: nodes.InterfaceDeploy, Step: "burnin_cpu"},
		{Interface: nodes.InterfaceDeploy, Step: "inject_files", Args: map[string]any{"files": []map[string]any{
			{"path": metal3Injected, "partition": 1, "content": base64.StdEncoding.EncodeToString([]byte(content))},
		}}},
	}
	l.ironic = &ironic.Client{Service: api}
	servicing := l.To(nodes.ProvisionStateOpts{Target: nodes.TargetService, ServiceSteps: steps}, 8*time.Minute)
	vm = servicing.VM
	if n, err := s.ironic.GetNode(ctx, node.UUID); err != nil {
		t.Fatal(err)
	} else if n.LastError != "" {
		t.Errorf("last_error after servicing: %s", n.LastError)
	}
	reportSeconds(t, servicing.Took, "servicing_s")
	for _, want := range []string{"burnin_cpu", "inject_files"} {
		if _, ok := vm.Find(want); !ok {
			t.Errorf("the console never mentioned the service step %s", want)
		}
	}
	vm.Kill()
	out, err := exec.CommandContext(ctx, "mtype", "-i", fmt.Sprintf("%s@@%d", disk, metal3FATStart), "::"+metal3Injected).CombinedOutput()
	if err != nil || string(out) != content {
		t.Errorf("mtype %s: %q (%v), want %q", metal3Injected, out, err, content)
	}
	reportSeconds(t, time.Since(begin), "whole_test_s")
}

// testLogger is metal3hw's Logger over the test log: baremetal-operator
// logs what it could not convert; here it is an error.
type testLogger struct{ t *testing.T }

func (l testLogger) Error(err error, msg string, kv ...any) {
	l.t.Helper()
	l.t.Errorf("baremetal-operator: %s: %v %v", msg, err, kv)
}

// checkHardwareDetails checks baremetal-operator's HardwareDetails of the
// VM against what QEMU was told.
func checkHardwareDetails(t *testing.T, d *metal3hw.HardwareDetails, m qemu.Machine, macs [2]string, pxe bool) {
	t.Helper()
	eq := func(what string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("HardwareDetails %s = %v, want %v", what, got, want)
		}
	}
	sv := m.SMBIOS
	eq("systemVendor.manufacturer", d.SystemVendor.Manufacturer, sv.SystemManufacturer)
	eq("systemVendor.productName", d.SystemVendor.ProductName, sv.SystemProduct+" ("+sv.SKU+")")
	eq("systemVendor.serialNumber", d.SystemVendor.SerialNumber, sv.SystemSerial)
	eq("firmware.bios.vendor", d.Firmware.BIOS.Vendor, sv.BIOSVendor)
	eq("firmware.bios.version", d.Firmware.BIOS.Version, sv.BIOSVersion)
	eq("firmware.bios.date", d.Firmware.BIOS.Date, sv.BIOSDate)
	eq("ramMebibytes", d.RAMMebibytes, m.MemoryMB)
	eq("cpu.arch", d.CPU.Arch, "x86_64")
	eq("cpu.model", d.CPU.Model, m.CPUModel)
	eq("cpu.count", d.CPU.Count, m.CPUs)
	if d.CPU.ClockMegahertz <= 0 || !slices.Contains(d.CPU.Flags, "lm") || !slices.IsSorted(d.CPU.Flags) {
		t.Errorf("HardwareDetails cpu: clock %v MHz, flags %v: want a clock and sorted flags with lm", d.CPU.ClockMegahertz, d.CPU.Flags)
	}
	if d.Hostname == "" {
		t.Error("HardwareDetails hostname is empty")
	}

	byMAC := map[string][]metal3hw.NIC{}
	for _, n := range d.NIC {
		byMAC[n.MAC] = append(byMAC[n.MAC], n)
	}
	for i, mac := range macs {
		got := byMAC[mac]
		if len(got) == 0 {
			t.Errorf("HardwareDetails has no NIC %s: %+v", mac, d.NIC)
			continue
		}
		n := got[0]
		if n.Name == "" || n.Model == "" || n.PCIAddress == "" {
			t.Errorf("NIC %s: name %q, model %q, PCI address %q: want all three", mac, n.Name, n.Model, n.PCIAddress)
		}
		if i == 0 {
			eq("NIC "+mac+" pxe", n.PXE, pxe)
			eq("NIC "+mac+" ip", n.IP, "10.0.2.15")
			continue
		}
		eq("NIC "+mac+" pxe", n.PXE, false)
		if n.LLDP == nil {
			t.Errorf("NIC %s has no LLDP data: %+v", mac, n)
			continue
		}
		eq("NIC "+mac+" lldp.switchSystemName", n.LLDP.SwitchSystemName, "metal3-switch-1")
		eq("NIC "+mac+" lldp.portID", n.LLDP.PortID, "Ethernet1/9")
		if n.LLDP.SwitchID == "" {
			t.Errorf("NIC %s lldp.switchID is empty", mac)
		}
	}

	bySerial := map[string]metal3hw.Storage{}
	for _, s := range d.Storage {
		bySerial[s.SerialNumber] = s
	}
	eq("storage count", len(d.Storage), len(m.Disks))
	for _, disk := range m.Disks {
		s, ok := bySerial[disk.Serial]
		if !ok {
			t.Errorf("HardwareDetails has no storage with serial %s: %+v", disk.Serial, d.Storage)
			continue
		}
		eq(disk.ID+" sizeBytes", s.SizeBytes, int64(disk.SizeMB)<<20)
		if disk.WWN != "" {
			eq(disk.ID+" wwn", s.WWN, disk.WWN)
		}
		// The kernel calls a virtio-blk disk rotational; QEMU's SCSI and
		// SATA disks say what their rotation rate makes them.
		want := metal3hw.SSD
		switch {
		case disk.Kind == qemu.DiskNVMe:
			want = metal3hw.NVME
		case disk.Kind == qemu.DiskVirtioBlk || disk.RotationRate != 1:
			want = metal3hw.HDD
		}
		eq(disk.ID+" type", s.Type, want)
		eq(disk.ID+" rotational", s.Rotational, want == metal3hw.HDD)
		if disk.Kind == qemu.DiskSCSI {
			if !strings.HasSuffix(s.HCTL, fmt.Sprintf(":0:%d:%d", disk.SCSITarget, disk.SCSILun)) {
				t.Errorf("%s hctl = %q, want H:0:%d:%d", disk.ID, s.HCTL, disk.SCSITarget, disk.SCSILun)
			}
			eq(disk.ID+" vendor", s.Vendor, disk.Vendor)
			eq(disk.ID+" model", s.Model, disk.Model)
		}
		if !strings.HasPrefix(s.Name, "/dev/disk/by-path/") || len(s.AlternateNames) != 2 {
			t.Errorf("%s name %q, alternate names %v: want the by-path name and the kernel name", disk.ID, s.Name, s.AlternateNames)
		}
	}
}

// deployTargetID is the ID of the disk the root-device hint names.
func deployTargetID(t *testing.T, m qemu.Machine) string {
	t.Helper()
	for _, d := range m.Disks {
		if d.Serial == deployTarget {
			return d.ID
		}
	}
	t.Fatalf("no disk with serial %s", deployTarget)
	return ""
}

// metal3Image is a 12 MiB whole-disk image: an MBR with boot code and one
// FAT partition (type 0x0c) of metal3FATSize at metal3FATStart, written by
// deploy/mkfs.
func metal3Image(t *testing.T) []byte {
	t.Helper()
	img := make([]byte, 12<<20)
	copy(img, "ironic-agent Metal3 VM test image")
	e := img[446:]
	e[4] = 0x0c
	binary.LittleEndian.PutUint32(e[8:], metal3FATStart/512)
	binary.LittleEndian.PutUint32(e[12:], metal3FATSize/512)
	img[510], img[511] = 0x55, 0xaa
	w := &sliceWriterAt{b: img[metal3FATStart : metal3FATStart+metal3FATSize]}
	if _, err := mkfs.WriteFAT(w, metal3FATSize, mkfs.FATOptions{Label: "METAL3", VolumeID: 0x4d33_0001, HiddenSectors: metal3FATStart / 512}); err != nil {
		t.Fatal(err)
	}
	return img
}

type sliceWriterAt struct{ b []byte }

func (w *sliceWriterAt) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(w.b)) {
		return 0, io.ErrShortWrite
	}
	return copy(w.b[off:], p), nil
}

// metal3ConfigDrive is the config drive as baremetal-operator sends it:
// a document Ironic builds the ISO from.
func metal3ConfigDrive(uuid string) map[string]any {
	return map[string]any{
		"meta_data": map[string]any{
			"uuid": uuid, "name": "metal3-host", "hostname": "metal3-host",
			"local-hostname": "metal3-host", "metal3-namespace": "metal3", "metal3-name": "worker-0",
			"public_keys": map[string]any{"0": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMetal3TestKey test@metal3"},
		},
		"user_data": "#cloud-config\nhostname: metal3-host\nruncmd:\n  - echo deployed by ironic-agent\n",
		"network_data": map[string]any{
			"links": []any{map[string]any{"id": "enp1s0", "type": "phy", "ethernet_mac_address": "52:54:00:6d:0a:01", "mtu": 1500}},
			"networks": []any{map[string]any{"id": "provisioning", "type": "ipv4", "link": "enp1s0",
				"ip_address": "192.0.2.10", "netmask": "255.255.255.0", "network_id": "provisioning",
				"routes": []any{map[string]any{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "192.0.2.1"}}}},
			"services": []any{map[string]any{"type": "dns", "address": "192.0.2.1"}},
		},
	}
}

// checkConfigDrive finds the config drive partition the agent added to the
// disk file (an MBR entry past the image's partition), reads its ISO 9660
// file system with xorriso, and compares the files with what was sent.
func checkConfigDrive(t *testing.T, disk string, sent map[string]any) {
	t.Helper()
	mbr := readAt(t, disk, 0, 512)
	var start, size int64
	for i := 1; i < 4; i++ {
		e := mbr[446+16*i:]
		if e[4] != 0 {
			start, size = int64(binary.LittleEndian.Uint32(e[8:]))*512, int64(binary.LittleEndian.Uint32(e[12:]))*512
			t.Logf("config drive partition: MBR entry %d, type 0x%02x, %d MiB at %d MiB", i+1, e[4], size>>20, start>>20)
			break
		}
	}
	if size == 0 {
		t.Fatalf("%s: no partition after the image's own in the MBR", disk)
	}
	iso := filepath.Join(t.TempDir(), "config-2.iso")
	if err := os.WriteFile(iso, readAt(t, disk, start, int(size)), 0o644); err != nil {
		t.Fatal(err)
	}
	if l := readAt(t, iso, 32768+40, 32); !bytes.HasPrefix(l, []byte("config-2 ")) {
		t.Errorf("the partition's ISO 9660 volume label is %q, want config-2", bytes.TrimRight(l, " "))
	}
	dir := filepath.Join(t.TempDir(), "cd")
	if out, err := exec.CommandContext(t.Context(), "xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/openstack/latest", dir).CombinedOutput(); err != nil {
		t.Fatalf("xorriso -extract: %v: %s", err, out)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("config drive: %v", err)
		}
		return b
	}
	if got := string(read("user_data")); got != sent["user_data"] {
		t.Errorf("openstack/latest/user_data = %q, want %q", got, sent["user_data"])
	}
	var md map[string]any
	if err := json.Unmarshal(read("meta_data.json"), &md); err != nil {
		t.Errorf("meta_data.json: %v", err)
	}
	for k, v := range sent["meta_data"].(map[string]any) {
		if fmt.Sprint(md[k]) != fmt.Sprint(v) {
			t.Errorf("meta_data.json %s = %v, want %v", k, md[k], v)
		}
	}
	var nd, want map[string]any
	if err := json.Unmarshal(read("network_data.json"), &nd); err != nil {
		t.Errorf("network_data.json: %v", err)
	}
	b, _ := json.Marshal(sent["network_data"])
	_ = json.Unmarshal(b, &want)
	if fmt.Sprint(nd) != fmt.Sprint(want) {
		t.Errorf("network_data.json = %v, want %v", nd, want)
	}
}
