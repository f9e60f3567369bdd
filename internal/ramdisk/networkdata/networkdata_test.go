package networkdata

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, name string) *Data {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

func TestParseNovaBondVLAN(t *testing.T) {
	d := mustParse(t, "nova-bond-vlan.json")
	if len(d.Links) != 4 || len(d.Networks) != 2 {
		t.Fatalf("links %d networks %d, want 4 and 2", len(d.Links), len(d.Networks))
	}
	bond := d.LinkByID("bond0")
	want := &BondConfig{Links: []string{"tap89cf0764-7b", "tapd3f7b9a3-3e"}, Mode: "802.3ad", MIIMon: 100 * time.Millisecond, XmitHashPolicy: "layer3+4"}
	if bond == nil || bond.Kind != Bond || !reflect.DeepEqual(bond.Bond, want) || bond.MAC.String() != "a0:36:9f:32:47:d8" {
		t.Errorf("bond0 = %+v, want %+v", bond, want)
	}
	if p := d.LinkByID("tap89cf0764-7b"); p.Kind != Physical || p.MTU != 1500 || p.MAC.String() != "a0:36:9f:32:47:d8" {
		t.Errorf("physical link = %+v", p)
	}
	if v := d.LinkByID("vlan0"); v.Kind != VLAN || *v.VLAN != (VLANConfig{Link: "bond0", ID: 101}) {
		t.Errorf("vlan0 = %+v", v)
	}
	n4 := d.Networks[0]
	if n4.Kind != IPv4Static || n4.Address != netip.MustParsePrefix("104.130.20.113/24") || len(n4.Routes) != 2 ||
		n4.Routes[0] != (Route{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("104.130.20.1")}) ||
		n4.Routes[1].Destination != netip.MustParsePrefix("10.176.0.0/20") {
		t.Errorf("network0 = %+v", n4)
	}
	n6 := d.Networks[1]
	if n6.Kind != IPv6Static || n6.Address != netip.MustParsePrefix("2001:db8:1::113/64") || n6.Routes[0].Destination.Bits() != 0 ||
		len(n6.DNS) != 1 || n6.DNS[0] != netip.MustParseAddr("2001:db8:1::53") {
		t.Errorf("network1 = %+v", n6)
	}
	if len(d.DNS) != 2 || d.DNS[0].String() != "8.8.8.8" {
		t.Errorf("DNS = %v", d.DNS)
	}
	if len(d.Warnings) != 0 {
		t.Errorf("warnings %q, want none (vif_id and network_id are identifiers)", d.Warnings)
	}
}

func TestParseMetal3(t *testing.T) {
	d := mustParse(t, "metal3-dhcp.json")
	if b := d.LinkByID("bond0").Bond; b.Mode != "active-backup" || b.MIIMon != 100*time.Millisecond {
		t.Errorf("bond = %+v", b)
	}
	if m := d.LinkByID("enp2s0").MAC.String(); m != "52:54:00:aa:bb:02" {
		t.Errorf("MAC %s, want it in lower case", m)
	}
	kinds := []NetworkKind{IPv4DHCP, IPv6SLAAC, IPv4Static}
	for i, n := range d.Networks {
		if n.Kind != kinds[i] {
			t.Errorf("networks[%d] kind %v, want %v", i, n.Kind, kinds[i])
		}
	}
	if s := d.Networks[2]; s.Address.String() != "192.168.111.20/24" || s.Gateway.String() != "192.168.111.1" {
		t.Errorf("static = %+v", s)
	}
}

// edit turns the Nova document into a variant for one case.
func edit(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "nova-bond-vlan.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func link(m map[string]any, i int) map[string]any {
	return m["links"].([]any)[i].(map[string]any)
}

func network(m map[string]any, i int) map[string]any {
	return m["networks"].([]any)[i].(map[string]any)
}

func TestParseErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(m map[string]any)
		want string
	}{
		{"bond mode", func(m map[string]any) { link(m, 2)["bond_mode"] = "lacp" }, `links[2].bond_mode: "lacp" is not a bond mode`},
		{"hash policy", func(m map[string]any) { link(m, 2)["bond_xmit_hash_policy"] = "layer9" }, `links[2].bond_xmit_hash_policy: "layer9"`},
		{"miimon", func(m map[string]any) { link(m, 2)["bond_miimon"] = "fast" }, `links[2].bond_miimon: want an integer`},
		{"bond link missing", func(m map[string]any) { link(m, 2)["bond_links"] = []any{"tap89cf0764-7b", "nope"} }, `links[2].bond_links[1]: no link has ID "nope"`},
		{"bond of a vlan", func(m map[string]any) { link(m, 2)["bond_links"] = []any{"vlan0"} }, `links[2].bond_links[0]: "vlan0" is a vlan link`},
		{"no bond links", func(m map[string]any) { delete(link(m, 2), "bond_links") }, `links[2].bond_links: missing`},
		{"vlan id", func(m map[string]any) { link(m, 3)["vlan_id"] = 4095 }, `links[3].vlan_id: 4095 is not from 1 to 4094`},
		{"vlan on slave", func(m map[string]any) { link(m, 3)["vlan_link"] = "tap89cf0764-7b" }, `links[3].vlan_link: "tap89cf0764-7b" is in bond "bond0"`},
		{"vlan parent", func(m map[string]any) { link(m, 3)["vlan_link"] = "bond9" }, `links[3].vlan_link: no link has ID "bond9"`},
		{"vlan mac", func(m map[string]any) { link(m, 3)["vlan_mac_address"] = "a0:36:9f" }, `links[3].vlan_mac_address: "a0:36:9f" is not an Ethernet MAC`},
		{"phy without mac", func(m map[string]any) { delete(link(m, 0), "ethernet_mac_address") }, `links[0].ethernet_mac_address: missing`},
		{"duplicate id", func(m map[string]any) { link(m, 1)["id"] = "tap89cf0764-7b" }, `links[1].id: "tap89cf0764-7b" is also links[0]'s`},
		{"duplicate mac", func(m map[string]any) { link(m, 1)["ethernet_mac_address"] = "A0:36:9F:32:47:D8" }, `links[1].ethernet_mac_address: a0:36:9f:32:47:d8 is also links[0]'s`},
		{"mtu", func(m map[string]any) { link(m, 0)["mtu"] = 9 }, `links[0].mtu: 9 is not from 68`},
		{"bond key on phy", func(m map[string]any) { link(m, 0)["bond_mode"] = "802.3ad" }, `links[0].bond_mode: not a field of a "phy" link`},
		{"vlan key on bond", func(m map[string]any) { link(m, 2)["vlan_id"] = 5 }, `links[2].vlan_id: not a field of a "bond" link`},
		{"link type", func(m map[string]any) { delete(link(m, 0), "type") }, `links[0].type: missing`},
		{"network type", func(m map[string]any) { network(m, 0)["type"] = "ipv5" }, `networks[0].type: "ipv5" is not a network type`},
		{"network link", func(m map[string]any) { network(m, 0)["link"] = "eth7" }, `networks[0].link: no link has ID "eth7"`},
		{"network on slave", func(m map[string]any) { network(m, 0)["link"] = "tapd3f7b9a3-3e" }, `networks[0].link: "tapd3f7b9a3-3e" is in bond`},
		{"address", func(m map[string]any) { network(m, 0)["ip_address"] = "104.130.20" }, `networks[0].ip_address: "104.130.20" is not an IP address`},
		{"family", func(m map[string]any) { network(m, 0)["ip_address"] = "2001:db8::1" }, `networks[0].ip_address: "2001:db8::1" is not an IPv4 address`},
		{"netmask", func(m map[string]any) { network(m, 0)["netmask"] = "255.0.255.0" }, `networks[0].netmask: "255.0.255.0" is not a contiguous netmask`},
		{"netmask family", func(m map[string]any) { network(m, 1)["netmask"] = "255.255.255.0" }, `networks[1].netmask: "255.255.255.0" is not a prefix length or an IPv6 netmask`},
		{"prefix", func(m map[string]any) { network(m, 1)["netmask"] = 129 }, `networks[1].netmask: prefix length 129`},
		{"prefix disagrees", func(m map[string]any) { network(m, 0)["ip_address"] = "104.130.20.113/16" }, `networks[0].netmask: /24 disagrees with ip_address's /16`},
		{"no netmask", func(m map[string]any) { delete(network(m, 0), "netmask") }, `networks[0].netmask: missing`},
		{"no address", func(m map[string]any) { delete(network(m, 0), "ip_address") }, `networks[0].ip_address: missing`},
		{"dhcp with address", func(m map[string]any) { network(m, 0)["type"] = "ipv4_dhcp" }, `networks[0].ip_address: not a field of a "ipv4_dhcp" network`},
		{"route gateway", func(m map[string]any) {
			network(m, 0)["routes"].([]any)[1].(map[string]any)["gateway"] = "2001:db8::1"
		}, `networks[0].routes[1].gateway: "2001:db8::1" is not an IPv4 address`},
		{"route netmask", func(m map[string]any) { delete(network(m, 0)["routes"].([]any)[0].(map[string]any), "netmask") }, `networks[0].routes[0].netmask: missing`},
		{"gateway", func(m map[string]any) { network(m, 1)["gateway"] = "10.0.0.1" }, `networks[1].gateway: "10.0.0.1" is not an IPv6 address`},
		{"dns", func(m map[string]any) { m["services"] = []any{map[string]any{"type": "dns", "address": "dns.example"}} }, `services[0].address: "dns.example" is not an IP address`},
		{"network dns", func(m map[string]any) { network(m, 1)["services"] = "8.8.8.8" }, `networks[1].services: want a list`},
		{"links not a list", func(m map[string]any) { m["links"] = map[string]any{} }, `links: want a list`},
		{"link not an object", func(m map[string]any) { m["links"] = []any{"eth0"} }, `links[0]: want an object`},
		{"id type", func(m map[string]any) { link(m, 0)["id"] = 7 }, `links[0].id: want a string, got 7`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(edit(t, tc.f))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestParseWarnsOfWhatIsNotApplied(t *testing.T) {
	d, err := Parse(edit(t, func(m map[string]any) {
		link(m, 0)["bond_lacp_rate"] = "fast"
		m["services"] = []any{map[string]any{"type": "ntp", "address": "10.0.0.1"}, map[string]any{"type": "dns", "address": "10.0.0.53"}}
		m["extra"] = true
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"links[0].bond_lacp_rate: unknown key, not applied", `services[0]: service "ntp" is not applied (only dns is)`, "extra: unknown key, not applied"}
	if !reflect.DeepEqual(d.Warnings, want) {
		t.Errorf("warnings\n%q\nwant\n%q", d.Warnings, want)
	}
	if len(d.DNS) != 1 || d.DNS[0].String() != "10.0.0.53" {
		t.Errorf("DNS %v", d.DNS)
	}
}

func TestParseRefusesWhatIsNotADocument(t *testing.T) {
	for _, in := range []string{"", "null", "[]", "{", `{"links": []} {}`, strings.Repeat(" ", maxSize+1)} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%.20q) = nil error", in)
		}
	}
	if d, err := Parse([]byte(`{}`)); err != nil || len(d.Links) != 0 {
		t.Errorf("Parse({}) = %+v, %v; want an empty document", d, err)
	}
	if d, err := Parse([]byte(`{"links": [{"id": "b", "type": "bond", "bond_links": ["p"], "bond_mode": "4"}, {"id": "p", "type": "phy", "ethernet_mac_address": "02:00:00:00:00:01"}]}`)); err != nil || d.Links[0].Bond.Mode != "802.3ad" {
		t.Errorf("bond mode 4: %+v, %v; want 802.3ad, and a bond may name a link listed after it", d, err)
	}
}

// FuzzParse: no input makes Parse panic, and what it accepts holds
// together (every reference resolves; static networks have an address of
// their family).
func FuzzParse(f *testing.F) {
	for _, name := range []string{"nova-bond-vlan.json", "metal3-dhcp.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"links":[{"id":"a","type":"vlan","vlan_link":"a","vlan_id":"7"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Parse(b)
		if err != nil {
			return
		}
		for _, l := range d.Links {
			switch l.Kind {
			case Bond:
				for _, id := range l.Bond.Links {
					if p := d.LinkByID(id); p == nil || p.Kind != Physical {
						t.Fatalf("bond %q of %q: not a physical link", l.ID, id)
					}
				}
			case VLAN:
				if p := d.LinkByID(l.VLAN.Link); p == nil || p.Kind == VLAN || l.VLAN.ID < 1 || l.VLAN.ID > 4094 {
					t.Fatalf("vlan %q: bad parent or ID", l.ID)
				}
			case Physical:
				if len(l.MAC) != 6 {
					t.Fatalf("physical %q without a MAC", l.ID)
				}
			}
		}
		for _, n := range d.Networks {
			if d.LinkByID(n.Link) == nil {
				t.Fatalf("network %q on no link", n.ID)
			}
			if n.Kind.Static() && (!n.Address.IsValid() || n.Address.Addr().Is6() != n.Kind.IPv6()) {
				t.Fatalf("static network %q: address %v", n.ID, n.Address)
			}
		}
	})
}
