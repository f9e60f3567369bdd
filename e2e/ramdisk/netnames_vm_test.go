package ramdisk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/netnames"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/netid"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// nicPlacements are NICs where servers have them, beside the harness's
// first NIC (virtio on the root bus, the capture's way out): NICs with an
// ACPI index on the root bus (where q35 gives the guest none) and in a
// root port (onboard: eno2), a card in a PCIe slot, a two-function card,
// and a NIC behind a PCI bridge in a PCIe slot (the bridge's SHPC slot 1:
// ens1). Each is the QEMU devices down to the NIC; the addresses stay
// clear of the harness's (0x03 on).
var nicPlacements = []qemu.PlacedNIC{
	{MAC: "52:54:00:aa:00:01", Devices: []string{"e1000e,addr=0x10,acpi-index=1"}},
	{MAC: "52:54:00:aa:00:02", Devices: []string{"pcie-root-port,id=rp1,bus=pcie.0,addr=0x11,chassis=1,slot=5", "virtio-net-pci,bus=rp1"}},
	{MAC: "52:54:00:aa:00:03", Devices: []string{"virtio-net-pci,addr=0x12.0,multifunction=on"}},
	{MAC: "52:54:00:aa:00:04", Devices: []string{"virtio-net-pci,addr=0x12.1"}},
	{MAC: "52:54:00:aa:00:05", Devices: []string{"pcie-root-port,id=rp2,bus=pcie.0,addr=0x13,chassis=2,slot=6",
		"pcie-pci-bridge,id=br1,bus=rp2", "e1000,bus=br1,addr=0x1"}},
	{MAC: "52:54:00:aa:00:06", Devices: []string{"pcie-root-port,id=rp3,bus=pcie.0,addr=0x14,chassis=3,slot=7", "e1000e,bus=rp3,acpi-index=2"}},
}

// nicNamesMachine is the machine of nicPlacements.
func nicNamesMachine(t *testing.T, rd *qemu.Ramdisk) qemu.Machine {
	m := qemu.DefaultMachine(qemu.BIOS)
	m.Name = "ironic-agent-nicnames"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.Disks = nil
	m.NICs = m.NICs[:1]
	m.AddPlacedNICs(nicPlacements, 10)
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	return m
}

// TestNICNamesInVM boots the ramdisk on a machine with NICs in several
// places with `ironic-agent capture-fixture`, which records the sysfs
// files udev's net_id reads, and checks every NIC name of the inventory
// against the name forky's udevadm (systemd 262, IPA 13's) gives the NIC
// from that record, by 99-default.link's policy. With net.ifnames=0 the
// kernel's names stay.
func TestNICNamesInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := cachedir.Dir()
	if err != nil {
		t.Fatal(err)
	}
	forky, err := ironic.EnsureRootFS(ctx, ironic.Series2026_1, cache)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("predictable", func(t *testing.T) {
		m := nicNamesMachine(t, rd)
		vm, tgz, err := qemu.RunUpload(ctx, m, "capture-fixture", "/run/fixture", qemu.Options{})
		if vm != nil {
			t.Cleanup(vm.Kill)
		}
		if err != nil {
			t.Fatal(err)
		}
		// The machine keeps exercising every kind of name.
		for _, why := range []string{"onboard", "slot", "path"} {
			if !slices.ContainsFunc(vm.Lines(), func(l qemu.Line) bool {
				return strings.Contains(l.Text, logtext.Msg(rdinit.EventNICRenamed)) && strings.Contains(l.Text, `why="99-default.link: `+why+`"`)
			}) {
				t.Errorf("no NIC named by its %s name", why)
			}
		}
		logNaming(t, vm)
		dir := filepath.Join(t.TempDir(), "fixture")
		if err := qemu.ExtractTarGz(bytes.NewReader(tgz), dir); err != nil {
			t.Fatal(err)
		}
		names := inventoryNames(t, filepath.Join(dir, "inventory.json"))
		sys, err := filepath.Abs(filepath.Join(dir, "root", "sys"))
		if err != nil {
			t.Fatal(err)
		}
		macs := []string{m.NICs[0].MAC}
		for _, p := range nicPlacements {
			macs = append(macs, p.MAC)
		}
		for _, mac := range macs {
			name := names[mac]
			if name == "" {
				t.Errorf("NIC %s is not in the inventory (%v)", mac, names)
				continue
			}
			props, err := netid.InRoot(ctx, forky.Dir, sys, name, "")
			if err != nil {
				t.Fatal(err)
			}
			// The record is of the renamed NIC: what udev would have
			// named it when the kernel gave it its own name.
			want := netnames.Decide(netnames.ID{Interface: "eth", Scheme: props["ID_NET_NAMING_SCHEME"],
				Onboard: props["ID_NET_NAME_ONBOARD"], Slot: props["ID_NET_NAME_SLOT"], Path: props["ID_NET_NAME_PATH"],
				MAC: props["ID_NET_NAME_MAC"], NameAssignType: netnames.NameEnum}, true)
			t.Logf("NIC %s: %s; udevadm: %v", mac, name, props)
			if want.Name != name {
				t.Errorf("NIC %s named %s; forky's udevadm names it %q (%s)", mac, name, want.Name, want.Why)
			}
		}
	})
	t.Run("ifnames=0", func(t *testing.T) {
		m := nicNamesMachine(t, rd)
		m.Append = "net.ifnames=0 ironic_agent.cmd=inventory ironic_agent.exit=poweroff ironic_agent.dhcp=none ironic_agent.ipv6=0 ironic_agent.network_data=0"
		vm, err := qemu.Start(ctx, m, qemu.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(vm.Kill)
		if err := vm.Wait(ctx); err != nil {
			t.Fatalf("%v\n%s", err, consoleTail(vm))
		}
		logNaming(t, vm)
		var names []string
		nameRE := regexp.MustCompile(`^\s*"name": "(eth[0-9]+|en[^"]*)"`)
		for _, l := range vm.Lines() {
			if n := nameRE.FindStringSubmatch(l.Text); n != nil {
				names = append(names, n[1])
			}
		}
		slices.Sort(names)
		if want := []string{"eth0", "eth1", "eth2", "eth3", "eth4", "eth5", "eth6"}; !slices.Equal(names, want) {
			t.Errorf("net.ifnames=0: inventory NIC names %q, want %q", names, want)
		}
	})
}

// logNaming logs the init's naming lines.
func logNaming(t *testing.T, vm *qemu.VM) {
	t.Logf("VM ran %v", vm.Elapsed().Round(time.Second))
	for _, l := range vm.Lines() {
		for _, ev := range []string{rdinit.EventNICRenamed, rdinit.EventNICNotRenamed, rdinit.EventNICKept, rdinit.EventNICNaming, rdinit.EventNICsNamed} {
			if strings.Contains(l.Text, logtext.Msg(ev)) {
				t.Log(strings.TrimSpace(l.Text))
			}
		}
	}
}

// inventoryNames reads a capture's inventory.json: interface name by MAC.
func inventoryNames(t *testing.T, file string) map[string]string {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var inv struct {
		Interfaces []struct {
			Name string `json:"name"`
			MAC  string `json:"mac_address"`
		} `json:"interfaces"`
	}
	if err := json.Unmarshal(b, &inv); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, i := range inv.Interfaces {
		names[i.MAC] = i.Name
	}
	return names
}
