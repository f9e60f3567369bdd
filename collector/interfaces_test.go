package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/inventory"
)

func TestInterfaces(t *testing.T) {
	dev := "sys/devices/pci0000:00/0000:00:03.0"
	ib := "sys/devices/pci0000:00/0000:00:04.0"
	root := tree(t, map[string]string{
		"sys/class/net/eno1":                                    "-> ../../devices/pci0000:00/0000:00:03.0/net/eno1",
		dev + "/net/eno1/address":                               "3C:FD:FE:00:00:01\n",
		dev + "/net/eno1/carrier":                               "1\n",
		dev + "/net/eno1/device":                                "-> ../../../0000:00:03.0",
		dev + "/vendor":                                         "0x8086\n",
		dev + "/device":                                         "0x1572\n",
		dev + "/driver":                                         "-> ../../../bus/pci/drivers/i40e",
		"sys/bus/pci/drivers/i40e/":                             "",
		"sys/class/net/bond0":                                   "-> ../../devices/virtual/net/bond0",
		"sys/devices/virtual/net/bond0/address":                 "3c:fd:fe:00:00:01\n",
		"sys/devices/virtual/net/bond0/carrier":                 "0\n",
		"sys/devices/virtual/net/bond0/bonding/":                "",
		"sys/class/net/bond0.100":                               "-> ../../devices/virtual/net/bond0.100",
		"sys/devices/virtual/net/bond0.100/address":             "3c:fd:fe:00:00:01\n",
		"sys/class/net/lo":                                      "-> ../../devices/virtual/net/lo",
		"sys/devices/virtual/net/lo/address":                    "00:00:00:00:00:00\n",
		"sys/class/net/veth1":                                   "-> ../../devices/virtual/net/veth1",
		"sys/devices/virtual/net/veth1/address":                 "fe:00:00:00:00:01\n",
		"sys/class/net/tap0.x":                                  "-> ../../devices/virtual/net/tap0.x",
		"sys/devices/virtual/net/tap0.x/address":                "fe:00:00:00:00:02\n",
		"sys/class/net/fake0":                                   "-> ../../devices/pci0000:00/0000:00:05.0/net/fake0",
		"sys/devices/pci0000:00/0000:00:05.0/net/fake0/address": "fa:16:3e:00:00:01\n",
		"sys/devices/pci0000:00/0000:00:05.0/net/fake0/device":  "-> ../../../0000:00:05.0",
		"sys/class/net/ib0":                                     "-> ../../devices/pci0000:00/0000:00:04.0/net/ib0",
		ib + "/net/ib0/address":                                 "a0:00:00:27:fe:80:00:00:00:00:00:00:7c:fe:90:03:00:29:26:52\n",
		ib + "/net/ib0/carrier":                                 "1\n",
		ib + "/net/ib0/device":                                  "-> ../../../0000:00:04.0",
		ib + "/vendor":                                          "0x15b3\n",
		ib + "/device":                                          "0x1017\n",
		netRecordPath: `{"interfaces": {
			"eno1": {"perm_address": "3c:fd:fe:aa:bb:cc", "ipv4": ["192.0.2.5", "192.0.2.6"],
			         "ipv6": ["fe80::1%eno1"], "link_modes": ["Autoneg", "1000baseT/Full", "10000baseT/Full"], "speed_mbps": 1000},
			"bond0": {"ipv4": [], "ipv6": [], "speed_mbps": 20000},
			"ib0": {"ipv4": ["10.0.0.1"], "ipv6": ["fe80::2%ib0"]}}}`,
	})
	inv, err := Collect(context.Background(), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(inv.Interfaces, "", "  ")
	s := inventory.Ptr[string]
	want, _ := json.MarshalIndent([]inventory.Interface{
		// 20000 is no speed lshw names: IPA reports none.
		{Name: "bond0", MACAddress: "3c:fd:fe:00:00:01"},
		{Name: "bond0.100", MACAddress: "3c:fd:fe:00:00:01"},
		{Name: "eno1", MACAddress: "3c:fd:fe:aa:bb:cc", IPv4Address: s("192.0.2.5"), IPv6Address: s("fe80::1%eno1"),
			HasCarrier: true, Vendor: s("0x8086"), Product: s("0x1572"), SpeedMbps: inventory.Ptr(10000),
			PCIAddress: s("0000:00:03.0"), Driver: s("i40e")},
		{Name: "ib0", MACAddress: "7c:fe:90:29:26:52", IPv4Address: s("10.0.0.1"), HasCarrier: true,
			Vendor: s("0x15b3"), Product: s("0x1017"), ClientID: s("ff:00:00:00:00:00:02:00:00:02:c9:00:7c:fe:90:03:00:29:26:52")},
	}, "", "  ")
	if string(got) != string(want) {
		t.Errorf("interfaces:\n%s\nwant:\n%s", got, want)
	}
}

func TestLshwSpeed(t *testing.T) {
	for _, c := range []struct {
		name  string
		facts netFacts
		want  *int
	}{
		// vmxnet3: supports 10000baseT/Full, advertises nothing.
		{"vmxnet3", netFacts{LinkModes: []string{"10000baseT/Full", "TP"}, SpeedMbps: inventory.Ptr(1000)}, inventory.Ptr(10000)},
		{"e1000", netFacts{LinkModes: []string{"10baseT/Half", "10baseT/Full", "100baseT/Half", "100baseT/Full", "1000baseT/Full", "Autoneg", "TP"}}, inventory.Ptr(1000)},
		{"25G CR", netFacts{LinkModes: []string{"10000baseKR/Full", "25000baseCR/Full"}, SpeedMbps: inventory.Ptr(25000)}, inventory.Ptr(25000)},
		{"56G", netFacts{LinkModes: []string{"40000baseCR4/Full", "56000baseCR4/Full"}}, inventory.Ptr(56000)},
		// Modes past bit 31 (an older capture's netlink names) are not
		// in ETHTOOL_GSET's mask: lshw never sees them.
		{"100G only past bit 31", netFacts{LinkModes: []string{"100000baseCR4/Full", "25000baseSR/Full"}, SpeedMbps: inventory.Ptr(100000)}, nil},
		{"100G with 40G", netFacts{LinkModes: []string{"40000baseCR4/Full", "100000baseCR4/Full"}}, inventory.Ptr(40000)},
		{"virtio", netFacts{}, nil},
		{"no modes, 10G link", netFacts{SpeedMbps: inventory.Ptr(10000)}, inventory.Ptr(10000)},
		{"bond of two 1G", netFacts{SpeedMbps: inventory.Ptr(2000)}, nil},
		{"no modes, 25G link", netFacts{SpeedMbps: inventory.Ptr(25000)}, nil},
		{"pause only", netFacts{LinkModes: []string{"Pause", "Asym_Pause", "Backplane"}, SpeedMbps: inventory.Ptr(100)}, inventory.Ptr(100)},
	} {
		got := lshwSpeed(c.facts)
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s: speed %v, want %v", c.name, deref(got), deref(c.want))
		}
	}
}

// TestInterfacesRecordedOrder: a captured tree lists its NICs in the
// order net.json recorded (the kernel's on the machine), not by name; a
// NIC the record lacks comes last.
func TestInterfacesRecordedOrder(t *testing.T) {
	files := map[string]string{
		netRecordPath: `{"interfaces": {}, "order": ["enp2s0", "enp0s11", "eno1"]}`,
	}
	for i, n := range []string{"eno1", "enp0s11", "enp0s12", "enp2s0"} {
		dev := fmt.Sprintf("sys/devices/pci0000:00/0000:00:%02x.0", i+3)
		files["sys/class/net/"+n] = "-> ../../" + strings.TrimPrefix(dev, "sys/") + "/net/" + n
		files[dev+"/net/"+n+"/address"] = fmt.Sprintf("52:54:00:00:00:%02x\n", i+1)
		files[dev+"/net/"+n+"/device"] = "-> ../../../" + path.Base(dev)
	}
	inv, err := Collect(context.Background(), Options{Root: tree(t, files)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, i := range inv.Interfaces {
		got = append(got, i.Name)
	}
	if want := []string{"enp2s0", "enp0s11", "eno1", "enp0s12"}; !slices.Equal(got, want) {
		t.Errorf("interfaces %v, want %v", got, want)
	}
	if macs := inv.MACs(); macs[0] != "52:54:00:00:00:04" {
		t.Errorf("MACs %v: not in the interfaces' order", macs)
	}
}

func TestIsVLANName(t *testing.T) {
	for name, want := range map[string]bool{
		"bond0.100": true, "eth0.5": true, ".7": true,
		"eth0": false, "eth0.": false, "a.b.100": false, "eth0.1x": false,
	} {
		if got := isVLANName(name); got != want {
			t.Errorf("isVLANName(%q) = %v", name, got)
		}
	}
}

type fakeLLDP map[string][]inventory.LLDPTLV

func (f fakeLLDP) Capture(ctx context.Context, names []string, _ time.Duration) (map[string][]inventory.LLDPTLV, error) {
	return f, nil
}

func TestLLDPHook(t *testing.T) {
	root := tree(t, map[string]string{
		"sys/class/net/eth0":                   "-> ../../devices/virtio0/net/eth0",
		"sys/devices/virtio0/net/eth0/address": "52:54:00:00:00:01\n",
		"sys/devices/virtio0/net/eth0/device":  "-> ../../../virtio0",
		"sys/class/net/eth1":                   "-> ../../devices/virtio1/net/eth1",
		"sys/devices/virtio1/net/eth1/address": "52:54:00:00:00:02\n",
		"sys/devices/virtio1/net/eth1/device":  "-> ../../../virtio1",
	})
	inv, _ := Collect(context.Background(), Options{Root: root})
	if inv.Interfaces[0].LLDP != nil {
		t.Errorf("lldp without CollectLLDP: %v", inv.Interfaces[0].LLDP)
	}
	inv, _ = Collect(context.Background(), Options{Root: root, CollectLLDP: true,
		LLDP: fakeLLDP{"eth0": {{Type: 1, Value: "04aa"}, {Type: 0, Value: ""}}}})
	b, _ := json.Marshal([][]inventory.LLDPTLV{inv.Interfaces[0].LLDP, inv.Interfaces[1].LLDP})
	if string(b) != `[[[1,"04aa"],[0,""]],[]]` {
		t.Errorf("lldp = %s", b)
	}
}

// FuzzNetRecord feeds recorded netlink facts (net.json: outside bytes in a
// fixture or a bug report) through the decoder and the speed rule.
func FuzzNetRecord(f *testing.F) {
	f.Add([]byte(`{"interfaces": {"eth0": {"perm_address": "52:54:00:00:00:09", "ipv4": ["192.0.2.1"], "ipv6": ["fe80::1%eth0"], "link_modes": ["10000baseT/Full", "Autoneg"], "speed_mbps": 1000}}}`))
	f.Add([]byte(`{"interfaces": {"eth0": {"link_modes": ["99999999999999999999baseX/Full", "base", "-5baseT"], "speed_mbps": -1}}}`))
	f.Add([]byte(`{"interfaces": null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := parseNetRecord(b)
		if err != nil {
			return
		}
		for _, facts := range rec.Interfaces {
			if s := lshwSpeed(facts); s != nil && *s <= 0 {
				t.Fatalf("speed_mbps %d from %+v", *s, facts)
			}
			first(facts.IPv4)
		}
	})
}

// linkComesUp is an LLDP capturer during whose wait the NIC's link comes
// up, as a NIC the ramdisk just set up does.
type linkComesUp struct{ carrier string }

func (l linkComesUp) Capture(ctx context.Context, names []string, _ time.Duration) (map[string][]inventory.LLDPTLV, error) {
	return map[string][]inventory.LLDPTLV{}, os.WriteFile(l.carrier, []byte("1\n"), 0o644)
}

// TestLLDPBeforeInterfaces: as IPA's list_network_interfaces, the LLDP
// wait comes before each NIC is read, so the carrier is the one after it.
func TestLLDPBeforeInterfaces(t *testing.T) {
	root := tree(t, map[string]string{
		"sys/class/net/eth0":                   "-> ../../devices/virtio0/net/eth0",
		"sys/devices/virtio0/net/eth0/address": "52:54:00:00:00:01\n",
		"sys/devices/virtio0/net/eth0/device":  "-> ../../../virtio0",
	})
	inv, _ := Collect(context.Background(), Options{Root: root, CollectLLDP: true,
		LLDP: linkComesUp{carrier: filepath.Join(root, "sys/devices/virtio0/net/eth0/carrier")}})
	if len(inv.Interfaces) != 1 || !inv.Interfaces[0].HasCarrier || inv.Interfaces[0].LLDP == nil {
		t.Errorf("interfaces = %+v, want eth0 with the carrier that came up during the LLDP wait and lldp []", inv.Interfaces)
	}
}
