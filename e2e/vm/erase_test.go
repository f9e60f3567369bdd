package vm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// eraseIronicPort is the port of TestVMEraseDevicesDefaults' own Ironic
// (the vm range).
var eraseIronicPort = portOffset() + 9512

// TestVMEraseDevicesDefaults is automated cleaning as a deployment that
// leaves Ironic's erase settings alone gets it: an Ironic of its own with
// [deploy]erase_devices_priority and erase_devices_metadata_priority
// unset (the agent's 10 and 99 apply), continue_if_disk_secure_erase_fails
// and enable_nvme_secure_erase at their defaults. The machine has one
// disk of each kind, small so the shred finishes under TCG: NVMe (QEMU's
// controller, formatted through the agent's NVME_IOCTL_ADMIN_CMD path),
// SATA on the AHCI, SCSI on virtio-scsi and virtio-blk, whose drives
// offer no secure erase, so they get IPA's fallback, one random pass and
// a zero pass. The node must reach available, the agent's log must name
// each device's method for both steps, and, once QEMU has exited, every byte of every
// disk file must be zero (the pattern written before is gone).
func TestVMEraseDevicesDefaults(t *testing.T) {
	seriesIndependent(t) // its own Ironic is the host series
	rd := ramdisk(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: installs and runs Debian's Ironic")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	own := ironic.StartForTest(t, ctx, ironic.Config{Dir: filepath.Join(theSuite.dir, "erase-services"), IronicPort: eraseIronicPort,
		NoInspector: true, DefaultErasePriorities: true})
	reportSeconds(t, own.Took, "ironic_start_s")
	client := own.Ironic

	macs := newMACs(t)
	eraseAgentPort := newAgentPort(t)
	m := qemu.DefaultMachine(qemu.BIOS)
	m.Name = "ironic-agent-erase"
	m.Dir = vmDir(t)
	m.MemoryMB = 768
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.NICs[0].MAC, m.NICs[1].MAC = macs[0], macs[1]
	m.Disks = []qemu.Disk{
		{ID: "nvme", Kind: qemu.DiskNVMe, SizeMB: 64, Serial: "LAB-NVME-0001"},
		{ID: "sata", Kind: qemu.DiskSATA, SizeMB: 64, Serial: "LAB-SATA-0001", WWN: "0x5000cca000000b01",
			Model: "LAB SATA HDD", AHCIPort: 2, RotationRate: 5400},
		{ID: "scsi", Kind: qemu.DiskSCSI, SizeMB: 64, Serial: "LAB-SCSI-0001", WWN: "0x5000c500a1b2c3d4",
			Vendor: "LABVEND", Model: "LAB-SCSI-HDD", SCSITarget: 3, SCSILun: 0, RotationRate: 7200},
		{ID: "vblk", Kind: qemu.DiskVirtioBlk, SizeMB: 64, Serial: "LAB-VBLK-0001"},
	}
	m.GuestFwd = map[string]string{guestHost + ":" + strconv.Itoa(eraseIronicPort): "127.0.0.1:" + strconv.Itoa(eraseIronicPort)}
	m.HostFwd = map[int]int{eraseAgentPort: 9999}
	// No disk here is the 4 GiB a root disk needs: one look, not IPA's
	// ten over 30 s, before the agent goes on.
	m.Append = strings.Join([]string{
		"ipa-api-url=http://" + guestHost + ":" + strconv.Itoa(eraseIronicPort),
		"ipa-advertise-host=127.0.0.1", "ipa-advertise-port=" + strconv.Itoa(eraseAgentPort),
		"ipa-lookup-timeout=900", "ipa-disk-wait-attempts=1", "ironic_agent.dhcp=" + macs[0],
	}, " ")
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Disks {
		size := int64(d.SizeMB) << 20
		fill := bytes.Repeat([]byte(d.ID+" pattern "), int(size)/len(d.ID+" pattern ")+1)[:size]
		if err := os.WriteFile(m.DiskPath(d.ID), fill, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// enroll needs only the suite's client: here, this test's Ironic.
	node := ironic.Enroll(t, ctx, client, ironic.NodeSpec{Name: "vm-erase", Properties: map[string]any{"capabilities": "boot_mode:bios"}}, macs[:]...)
	cleaning := kernelLifecycle(t, ctx, client, node.UUID, m).Provide(15 * time.Minute)
	vm, took := cleaning.VM, cleaning.Took
	n, err := client.GetNode(ctx, node.UUID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("automated cleaning with Ironic's default erase priorities: node last_error %q", n.LastError)
	reportSeconds(t, took, "cleaning_s")

	// What the agent says it did, per device and step: the metadata
	// wipe (99) first, then erase_devices (10).
	methods := map[string]string{}
	wiped := 0
	for _, l := range vm.Lines() {
		if !strings.Contains(l.Text, logtext.Msg(erase.EventDeviceEraseFinished)) {
			continue
		}
		step, dev, method := logField(l.Text, "step"), logField(l.Text, "device"), logField(l.Text, "method")
		t.Logf("%s %s: %s", step, dev, method)
		reportSecondsText(t, logField(l.Text, "seconds"), step, dev+"_s")
		switch step {
		case "erase_devices_metadata":
			if len(methods) > 0 {
				t.Errorf("erase_devices_metadata on %s after erase_devices began: Ironic runs priority 99 first", dev)
			}
			wiped++
		case "erase_devices":
			methods[dev] = method
		}
	}
	if wiped != len(m.Disks) {
		t.Errorf("erase_devices_metadata reported %d devices, want %d", wiped, len(m.Disks))
	}
	if len(methods) != len(m.Disks) {
		t.Errorf("erase_devices reported %d devices (%v), want %d", len(methods), methods, len(m.Disks))
	}
	for dev, method := range methods {
		want := "overwrite"
		if strings.HasPrefix(dev, "/dev/nvme") {
			want = "NVMe format, user data erase (ses=1)"
		}
		if method != want {
			t.Errorf("%s: erase_devices used %q, want %q", dev, method, want)
		}
	}

	vm.Kill()
	for _, d := range m.Disks {
		b, err := os.ReadFile(m.DiskPath(d.ID))
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 }); i >= 0 {
			t.Errorf("%s (%s): data left at byte %d after cleaning: %q", d.ID, d.Kind, i, b[i:min(len(b), i+32)])
		}
	}
}

// logField returns the value of key in a log/slog text line (unquoted).
func logField(line, key string) string {
	_, rest, ok := strings.Cut(line, " "+key+"=")
	if !ok {
		return ""
	}
	if strings.HasPrefix(rest, `"`) {
		if v, err := strconv.QuotedPrefix(rest); err == nil {
			u, _ := strconv.Unquote(v)
			return u
		}
	}
	v, _, _ := strings.Cut(rest, " ")
	return v
}
