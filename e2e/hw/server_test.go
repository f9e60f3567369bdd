package hw

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
	"github.com/ironic-go/ironic-agent/inventory"
)

// TestServerShapedInventoryInVM boots the agent ramdisk on
// qemu.ServerMachine: disks behind QEMU's MegaRAID SAS 2108, SAS 1068 and
// PVSCSI controllers, USB sticks on xHCI and EHCI, IDE on PIIX3 and NVMe;
// e1000e, vmxnet3, virtio and USB network adapters; a USB keyboard and an
// SSIF BMC. The real Linux drivers run (megaraid_sas, mptsas, vmw_pvscsi,
// usb_storage, ata_piix, nvme, e1000e, vmxnet3, cdc_ether, ipmi_ssif), and `ironic-agent capture-fixture` records the inventory
// and the files it read. Every disk must be there with the size, serial,
// WWN, vendor and model the machine gave it, an HCTL where the kernel
// gives one, a by-path under its controller's PCI slot and IPA's
// rotational flag; every NIC with its MAC and its driver; the BMC's
// /dev/ipmi0 (the capture's ipmi.json) through SMBus.
func TestServerShapedInventoryInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine (minutes under TCG)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("SKIPPED: needs qemu-system-x86_64 (./test.sh installs qemu-system-x86)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	built := time.Since(start)
	m := qemu.ServerMachine(qemu.BIOS)
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	vm, tgz, err := qemu.RunUpload(ctx, m, "capture-fixture", "/run/capture", qemu.Options{})
	if vm != nil {
		t.Cleanup(vm.Kill)
		t.Logf("VM: %s from start to power-off (ramdisk %s before); serial console in %s",
			vm.Elapsed().Round(time.Second), built.Round(time.Second), vm.LogPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := qemu.ExtractTarGz(bytes.NewReader(tgz), dir); err != nil {
		t.Fatal(err)
	}
	var inv inventory.Inventory
	qemu.ReadJSON(t, filepath.Join(dir, "inventory.json"), &inv)

	checkServerDisks(t, m, inv.Disks)
	for _, n := range m.NICs {
		var got *inventory.Interface
		for i := range inv.Interfaces {
			if inv.Interfaces[i].MACAddress == n.MAC {
				got = &inv.Interfaces[i]
			}
		}
		if got == nil {
			t.Errorf("NIC %s %s: not in the inventory", n.Model, n.MAC)
			continue
		}
		d := deref(got.Driver)
		t.Logf("NIC %-14s %s: %s driver %s pci %s vendor %s product %s", n.Model, n.MAC, got.Name, d,
			deref(got.PCIAddress), deref(got.Vendor), deref(got.Product))
		if want := serverNICDriver[n.Model]; d != want {
			t.Errorf("NIC %s %s: driver %q, want %s", n.Model, n.MAC, d, want)
		}
		if want, ok := serverNICSpeed[n.Model]; ok && (got.SpeedMbps == nil || *got.SpeedMbps != want) {
			t.Errorf("NIC %s %s: speed_mbps %v, want %d (IPA's: lshw's fastest supported mode)", n.Model, n.MAC, derefInt(got.SpeedMbps), want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ipmi.json")); err != nil {
		t.Errorf("no IPMI device in the guest: the SSIF BMC was not found (%v)", err)
	}
	t.Logf("bmc_address %s", deref(inv.BMCAddress))
}

// serverNICDriver is the Linux driver of each NIC model.
var serverNICDriver = map[string]string{
	"virtio-net-pci": "virtio_net", "e1000e": "e1000e", "vmxnet3": "vmxnet3", qemu.NICUSB: "cdc_ether",
}

// serverNICSpeed is the speed_mbps IPA 13 reports for a NIC model: the
// fastest mode the driver supports. vmxnet3 supports 10000baseT/Full and
// advertises no mode, and QEMU gives it a 1000 Mb/s link, so only the
// supported mask gives 10000.
var serverNICSpeed = map[string]int{"e1000e": 1000, "vmxnet3": 10000}

// derefInt is *p, or nil for a nil p.
func derefInt(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// checkServerDisks compares the inventory's disks with the machine's, each
// found by its serial.
func checkServerDisks(t *testing.T, m qemu.Machine, disks []inventory.Disk) {
	t.Helper()
	if len(disks) != len(m.Disks) {
		t.Errorf("the inventory lists %d disks, the machine has %d", len(disks), len(m.Disks))
	}
	slots := serverSlots(t, m)
	for _, d := range m.Disks {
		var got *inventory.Disk
		for i := range disks {
			if deref(disks[i].Serial) == d.Serial {
				got = &disks[i]
			}
		}
		if got == nil {
			t.Errorf("disk %s (%s, serial %s): not in the inventory", d.ID, d.Kind, d.Serial)
			continue
		}
		t.Logf("disk %-12s %s: size %d serial %s wwn %s vendor %q model %q hctl %s tran %s rotational %v by_path %s",
			d.Kind, got.Name, got.Size, deref(got.Serial), deref(got.WWN), deref(got.Vendor), deref(got.Model),
			deref(got.HCTL), deref(got.Tran), got.Rotational, deref(got.ByPath))
		if got.Size != int64(d.SizeMB)<<20 {
			t.Errorf("%s: size %d, want %d", d.ID, got.Size, int64(d.SizeMB)<<20)
		}
		if w := deref(got.WWN); d.WWN != "" && w != d.WWN {
			t.Errorf("%s: wwn %q, want %q", d.ID, w, d.WWN)
		}
		if d.Kind != qemu.DiskNVMe && d.Kind != qemu.DiskPIIX && deref(got.Vendor) != d.Vendor {
			t.Errorf("%s: vendor %q, want %q", d.ID, deref(got.Vendor), d.Vendor)
		}
		if d.Kind != qemu.DiskNVMe && deref(got.Model) != d.Model {
			t.Errorf("%s: model %q, want %q", d.ID, deref(got.Model), d.Model)
		}
		if d.Kind != qemu.DiskNVMe && got.HCTL == nil {
			t.Errorf("%s: no hctl", d.ID)
		}
		// IPA: rotational from sysfs; the kernel takes a device as
		// spinning unless it reports a rotation rate of 1 (or is NVMe).
		if want := d.Kind != qemu.DiskNVMe && d.RotationRate != 1; got.Rotational != want {
			t.Errorf("%s: rotational %v, want %v", d.ID, got.Rotational, want)
		}
		if p := deref(got.ByPath); !strings.HasPrefix(p, "/dev/disk/by-path/pci-0000:00:"+slots[d.ID]+".0-") {
			t.Errorf("%s: by_path %q, want one under PCI slot %s", d.ID, p, slots[d.ID])
		}
	}
}

// serverSlots is the PCI slot (two hex digits) of each disk's controller,
// read from the machine's own command line.
func serverSlots(t *testing.T, m qemu.Machine) map[string]string {
	t.Helper()
	args, err := m.Args(qemu.RelayCommand, -1)
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]string{}    // controller or device id -> slot
	usbHost := map[string]string{} // disk id -> its USB host controller
	slots := map[string]string{}
	for _, a := range args {
		f := map[string]string{}
		for _, kv := range strings.Split(a, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		if s, ok := f["addr"]; ok {
			addr[f["id"]] = strings.TrimPrefix(s, "0x")
		}
		bus, _, _ := strings.Cut(f["bus"], ".")
		drive := strings.TrimPrefix(f["drive"], "d-")
		switch {
		case drive != "" && f["addr"] != "":
			slots[drive] = addr[f["id"]]
		case drive != "" && strings.HasPrefix(bus, "bot-"):
			slots[drive] = addr[usbHost[strings.TrimPrefix(bus, "bot-")]]
		case drive != "":
			slots[drive] = addr[bus]
		case strings.HasPrefix(f["id"], "bot-"):
			usbHost[strings.TrimPrefix(f["id"], "bot-")] = bus
		}
	}
	return slots
}

func deref(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}
