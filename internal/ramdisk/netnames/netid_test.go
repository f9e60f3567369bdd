package netnames

import (
	"reflect"
	"strings"
	"testing"
)

// want is what net_id and the policy give one interface under one scheme.
type want struct {
	scheme string
	// unnamed: net_id does not name this link under scheme.
	unnamed                         bool
	onboard, slot, path, mac, final string
	alt                             []string
}

// netCase is one machine shape, its interface and what systemd's rules
// (src/udev/udev-builtin-net_id.c of systemd 262, 99-default.link,
// 73-usb-net-by-mac.link, 73-special-net-names.rules) name it, worked out
// by hand from those rules. The same trees are given to udevadm in
// TestUdevadmAgrees.
type netCase struct {
	name  string
	build func(tr *tree)
	iface string
	wants []want
	// hwdb: the name depends on a property udev's rules import from its
	// hardware database before net_id runs, which `udevadm test-builtin`
	// does not do: no comparison with udevadm.
	hwdb bool
}

const root0 = "devices/pci0000:00"

// onBus0 makes PCI function fn (0000:00:DD.F) on the first host bridge.
func onBus0(tr *tree, fn string, o pciOpts) string {
	tr.device(root0, "")
	dev := root0 + "/" + fn
	tr.pci(dev, o)
	return dev
}

// behind makes PCI function fn below a root port (0000:00:1c.0) and, in
// turn, the bridges of path, with the root port's ACPI _SUN rootSun.
func behind(tr *tree, fn string, o pciOpts, rootSun string, path ...string) string {
	dev := onBus0(tr, "0000:00:1c.0", pciOpts{bridge: true, sun: rootSun})
	for _, b := range path {
		dev += "/" + b
		tr.pci(dev, pciOpts{bridge: true})
	}
	dev += "/" + fn
	tr.pci(dev, o)
	return dev
}

// usbNIC makes a USB NIC on the xHCI controller 0000:00:14.0: hub
// devices for the port chain (2-1, 2-1.4, ...), the last with vendor and
// product, and interface intf (2-1.4:1.0).
func usbNIC(tr *tree, iface, intf string, o netOpts, vendor, product string) {
	x := onBus0(tr, "0000:00:14.0", pciOpts{})
	bus, chain, _ := strings.Cut(strings.Split(intf, ":")[0], "-")
	dev := x + "/usb" + bus
	tr.device(dev, "usb", "DEVTYPE=usb_device")
	name := bus + "-"
	for i, p := range strings.Split(chain, ".") {
		if i > 0 {
			name += "."
		}
		name += p
		dev += "/" + name
		tr.device(dev, "usb", "DEVTYPE=usb_device")
	}
	if vendor != "" {
		tr.write(dev+"/idVendor", vendor+"\n")
		tr.write(dev+"/idProduct", product+"\n")
	}
	dev += "/" + intf
	tr.device(dev, "usb", "DEVTYPE=usb_interface")
	tr.net(dev, iface, o)
}

var netCases = []netCase{
	{
		name: "onboard acpi_index",
		build: func(tr *tree) {
			tr.net(onBus0(tr, "0000:00:1f.6", pciOpts{acpiIndex: "1"}), "eth0", netOpts{mac: "3c:ec:ef:00:00:01"})
		},
		iface: "eth0",
		wants: []want{{scheme: "v261", onboard: "eno1", path: "enp0s31f6", mac: "enx3cecef000001", final: "eno1",
			alt: []string{"enp0s31f6", "enx3cecef000001"}}},
	},
	{
		name: "onboard second port of one function",
		build: func(tr *tree) {
			tr.net(onBus0(tr, "0000:00:1f.6", pciOpts{acpiIndex: "1"}), "eth1", netOpts{devPort: "1", mac: "3c:ec:ef:00:00:02"})
		},
		iface: "eth1",
		wants: []want{{scheme: "v261", onboard: "eno1d1", path: "enp0s31f6d1", mac: "enx3cecef000002", final: "eno1d1",
			alt: []string{"enp0s31f6d1", "enx3cecef000002"}}},
	},
	{
		name:  "SMBIOS index when no acpi_index",
		build: func(tr *tree) { tr.net(onBus0(tr, "0000:00:19.0", pciOpts{index: "3"}), "eth0", netOpts{assign: 1}) },
		iface: "eth0",
		wants: []want{{scheme: "v261", onboard: "eno3", path: "enp0s25", final: "eno3", alt: []string{"enp0s25"}}},
	},
	{
		name: "acpi_index 0",
		build: func(tr *tree) {
			tr.net(onBus0(tr, "0000:00:19.0", pciOpts{acpiIndex: "0"}), "eth0", netOpts{assign: 1})
		},
		iface: "eth0",
		wants: []want{
			{scheme: "v261", onboard: "eno0", path: "enp0s25", final: "eno0", alt: []string{"enp0s25"}},
			{scheme: "v239", path: "enp0s25", final: "enp0s25"},
		},
	},
	{
		name: "onboard index above 14 bits",
		build: func(tr *tree) {
			tr.net(onBus0(tr, "0000:00:19.0", pciOpts{acpiIndex: "20000"}), "eth0", netOpts{assign: 1})
		},
		iface: "eth0",
		wants: []want{
			{scheme: "v261", onboard: "eno20000", path: "enp0s25", final: "eno20000", alt: []string{"enp0s25"}},
			{scheme: "v247", path: "enp0s25", final: "enp0s25"},
		},
	},
	{
		name: "hotplug slot behind a root port",
		build: func(tr *tree) {
			tr.slot("5", "0000:01:00")
			tr.net(behind(tr, "0000:01:00.0", pciOpts{}, ""), "eth0", netOpts{assign: 1})
		},
		iface: "eth0",
		wants: []want{{scheme: "v261", slot: "ens5", path: "enp1s0", final: "ens5", alt: []string{"enp1s0"}}},
	},
	{
		name: "multi-function card in a slot",
		build: func(tr *tree) {
			tr.slot("6", "0000:02:00")
			behind(tr, "0000:02:00.0", pciOpts{multifunction: true}, "")
			tr.net(behind(tr, "0000:02:00.1", pciOpts{multifunction: true}, ""), "eth1", netOpts{assign: 1})
		},
		iface: "eth1",
		wants: []want{{scheme: "v261", slot: "ens6f1", path: "enp2s0f1", final: "ens6f1", alt: []string{"enp2s0f1"}}},
	},
	{
		name: "function 0 of a multi-function card",
		build: func(tr *tree) {
			tr.net(behind(tr, "0000:02:00.0", pciOpts{multifunction: true}, ""), "eth0", netOpts{assign: 1})
		},
		iface: "eth0",
		wants: []want{{scheme: "v261", path: "enp2s0f0", final: "enp2s0f0"}},
	},
	{
		// The slot is the bridge's: every function behind it would
		// claim it.
		name: "slot of a bridge",
		build: func(tr *tree) {
			tr.slot("7", "0000:03:00")
			tr.net(behind(tr, "0000:04:01.0", pciOpts{}, "", "0000:03:00.0"), "eth0", netOpts{assign: 1})
		},
		iface: "eth0",
		wants: []want{
			{scheme: "v261", path: "enp4s1", final: "enp4s1"},
			{scheme: "v251", path: "enp4s1", final: "enp4s1"},
			{scheme: "v245", slot: "ens7", path: "enp4s1", final: "ens7", alt: []string{"enp4s1"}},
		},
	},
	{
		name: "multi-function device behind a slotted bridge",
		build: func(tr *tree) {
			tr.slot("7", "0000:03:00")
			tr.net(behind(tr, "0000:04:00.0", pciOpts{multifunction: true}, "", "0000:03:00.0"), "eth0", netOpts{assign: 1})
		},
		iface: "eth0",
		wants: []want{
			{scheme: "v261", path: "enp4s0f0", final: "enp4s0f0"},
			{scheme: "v251", slot: "ens7f0", path: "enp4s0f0", final: "ens7f0", alt: []string{"enp4s0f0"}},
		},
	},
	{
		name: "ACPI _SUN of the function, virtio",
		build: func(tr *tree) {
			v := onBus0(tr, "0000:00:03.0", pciOpts{sun: "3"}) + "/virtio0"
			tr.device(v, "virtio", "DRIVER=virtio_net")
			tr.net(v, "eth0", netOpts{assign: 1})
		},
		iface: "eth0",
		wants: []want{
			{scheme: "v261", slot: "ens3", path: "enp0s3", final: "ens3", alt: []string{"enp0s3"}},
			{scheme: "v255", path: "enp0s3", final: "enp0s3"},
		},
	},
	{
		name:  "ACPI _SUN of the root port, single function",
		build: func(tr *tree) { tr.net(behind(tr, "0000:01:00.0", pciOpts{}, "4"), "eth0", netOpts{assign: 1}) },
		iface: "eth0",
		wants: []want{{scheme: "v261", path: "enp1s0", final: "enp1s0"}},
	},
	{
		name: "ACPI _SUN of the root port, multi-function",
		build: func(tr *tree) {
			tr.net(behind(tr, "0000:01:00.1", pciOpts{multifunction: true}, "4"), "eth0", netOpts{assign: 1})
		},
		iface: "eth0",
		wants: []want{{scheme: "v261", slot: "ens4f1", path: "enp1s0f1", final: "ens4f1", alt: []string{"enp1s0f1"}}},
	},
	{
		name: "PCI domain",
		build: func(tr *tree) {
			tr.device("devices/pci0001:00", "")
			tr.pci("devices/pci0001:00/0001:00:01.0", pciOpts{bridge: true})
			tr.pci("devices/pci0001:00/0001:00:01.0/0001:03:00.0", pciOpts{})
			tr.net("devices/pci0001:00/0001:00:01.0/0001:03:00.0", "eth0", netOpts{assign: 1})
		},
		iface: "eth0",
		wants: []want{{scheme: "v261", path: "enP1p3s0", final: "enP1p3s0"}},
	},
	{
		name: "MANA: no domain",
		build: func(tr *tree) {
			tr.device("devices/pci7870:00", "")
			tr.pci("devices/pci7870:00/7870:00:00.0", pciOpts{vendor: "0x1414", device: "0x00ba"})
			tr.net("devices/pci7870:00/7870:00:00.0", "eth0", netOpts{assign: 1})
		},
		iface: "eth0",
		wants: []want{{scheme: "v261", path: "enp0s0", final: "enp0s0"}},
		hwdb:  true,
	},
	{
		name: "ARI",
		build: func(tr *tree) {
			tr.net(behind(tr, "0000:05:01.2", pciOpts{ari: true, multifunction: true}, ""), "eth0", netOpts{assign: 1})
		},
		iface: "eth0",
		wants: []want{
			{scheme: "v261", path: "enp5s1f10", final: "enp5s1f10"},
			{scheme: "v238", path: "enp5s1f2", final: "enp5s1f2"},
		},
	},
	{
		name: "SR-IOV virtual function",
		build: func(tr *tree) {
			pf := behind(tr, "0000:03:00.0", pciOpts{acpiIndex: "2"}, "")
			vf := behind(tr, "0000:03:10.0", pciOpts{}, "")
			tr.link(vf+"/physfn", pf)
			tr.link(pf+"/virtfn0", vf)
			tr.net(pf, "eth0", netOpts{})
			tr.net(vf, "eth1", netOpts{assign: 1})
		},
		iface: "eth1",
		wants: []want{
			{scheme: "v261", onboard: "eno2v0", path: "enp3s0v0", final: "eno2v0", alt: []string{"enp3s0v0"}},
			{scheme: "v238", path: "enp3s16", final: "enp3s16"},
		},
	},
	{
		name: "switchdev representor",
		build: func(tr *tree) {
			tr.net(behind(tr, "0000:03:00.0", pciOpts{}, ""), "eth3", netOpts{assign: 1, physPortName: "pf0vf3"})
		},
		iface: "eth3",
		wants: []want{
			{scheme: "v261", path: "enp3s0r3", final: "enp3s0r3"},
			{scheme: "v253", path: "enp3s0npf0vf3", final: "enp3s0npf0vf3"},
		},
	},
	{
		name: "physical port name",
		build: func(tr *tree) {
			tr.net(behind(tr, "0000:03:00.0", pciOpts{}, ""), "eth0", netOpts{assign: 1, physPortName: "p1", devPort: "1"})
		},
		iface: "eth0",
		wants: []want{{scheme: "v261", path: "enp3s0np1", final: "enp3s0np1"}},
	},
	{
		name:  "USB NIC: by MAC",
		build: func(tr *tree) { usbNIC(tr, "eth0", "2-1:1.0", netOpts{mac: "00:e0:4c:68:00:01"}, "0bda", "8153") },
		iface: "eth0",
		wants: []want{{scheme: "v261", path: "enp0s20u1", mac: "enx00e04c680001", final: "enx00e04c680001"}},
	},
	{
		name:  "USB NIC with a random MAC: by path",
		build: func(tr *tree) { usbNIC(tr, "usb0", "2-1.4:2.1", netOpts{assign: 1}, "", "") },
		iface: "usb0",
		wants: []want{{scheme: "v261", path: "enp0s20u1u4c2i1", final: "enp0s20u1u4c2i1"}},
	},
	{
		name:  "Dell iDRAC USB NIC",
		build: func(tr *tree) { usbNIC(tr, "usb0", "1-4:1.0", netOpts{mac: "10:98:36:00:00:01"}, "413c", "a102") },
		iface: "usb0",
		wants: []want{{scheme: "v261", path: "enp0s20u4", mac: "enx109836000001", final: "idrac"}},
	},
	{
		name: "InfiniBand, port in dev_id",
		build: func(tr *tree) {
			tr.net(behind(tr, "0000:41:00.0", pciOpts{}, ""), "ib1", netOpts{typ: 32, devID: "0x1",
				mac: "00:00:10:29:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01"})
		},
		iface: "ib1",
		wants: []want{
			{scheme: "v261", path: "ibp65s0", final: "ibp65s0"},
			{scheme: "v239", unnamed: true},
		},
	},
	{
		name: "stacked link",
		build: func(tr *tree) {
			tr.net(onBus0(tr, "0000:00:19.0", pciOpts{acpiIndex: "1"}), "eth0", netOpts{stacked: true})
		},
		iface: "eth0",
		wants: []want{{scheme: "v261", unnamed: true}},
	},
	{
		name: "ACPI platform device",
		build: func(tr *tree) {
			tr.device("devices/platform", "")
			tr.device("devices/platform/HISI00C2:00", "platform")
			tr.net("devices/platform/HISI00C2:00", "eth0", netOpts{assign: 1})
		},
		iface: "eth0",
		wants: []want{{scheme: "v261", path: "enahisic2i0", final: "enahisic2i0"}},
	},
	{
		name: "kernel's predictable name kept",
		build: func(tr *tree) {
			tr.net(onBus0(tr, "0000:00:19.0", pciOpts{acpiIndex: "1"}), "eth0", netOpts{assign: 1, nameAssignType: NamePredictable})
		},
		iface: "eth0",
		wants: []want{{scheme: "v261", onboard: "eno1", path: "enp0s25", alt: []string{"eno1", "enp0s25"}}},
	},
	{
		name: "user space's name kept",
		build: func(tr *tree) {
			tr.net(onBus0(tr, "0000:00:19.0", pciOpts{acpiIndex: "1"}), "lan0", netOpts{assign: 1, nameAssignType: NameRenamed})
		},
		iface: "lan0",
		wants: []want{{scheme: "v261", onboard: "eno1", path: "enp0s25", alt: []string{"eno1", "enp0s25"}}},
	},
	{
		name: "path too long for a name",
		build: func(tr *tree) {
			tr.device("devices/pci0012:00", "")
			tr.pci("devices/pci0012:00/0012:00:01.0", pciOpts{bridge: true})
			tr.pci("devices/pci0012:00/0012:00:01.0/0012:a1:1f.7", pciOpts{})
			tr.net("devices/pci0012:00/0012:00:01.0/0012:a1:1f.7", "eth0", netOpts{assign: 1, devPort: "12"})
		},
		iface: "eth0",
		wants: []want{{scheme: "v261", path: "enP18p161s31f7d12", alt: []string{"enP18p161s31f7d12"}}},
	},
}

func TestComputeCases(t *testing.T) {
	for _, c := range netCases {
		t.Run(c.name, func(t *testing.T) {
			tr := newTree(t)
			c.build(tr)
			for _, w := range c.wants {
				sname := w.scheme
				scheme, err := ParseScheme(sname)
				if err != nil {
					t.Fatal(err)
				}
				id, err := Compute(tr.root, c.iface, scheme)
				if err != nil {
					t.Fatal(err)
				}
				got := [...]string{id.Scheme, id.Onboard, id.Slot, id.Path, id.MAC}
				exp := [...]string{w.scheme, w.onboard, w.slot, w.path, w.mac}
				if w.unnamed {
					exp[0] = ""
				}
				if got != exp {
					t.Errorf("%s: scheme, onboard, slot, path, mac = %q, want %q", sname, got, exp)
				}
				d := Decide(id, true)
				if d.Name != w.final || !reflect.DeepEqual(d.AltNames, w.alt) {
					t.Errorf("%s: name %q alt %q (%s), want %q alt %q", sname, d.Name, d.AltNames, d.Why, w.final, w.alt)
				}
			}
		})
	}
}
