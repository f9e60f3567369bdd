package lldp

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/inventory"
)

func tlvs(pairs ...any) []inventory.LLDPTLV {
	var out []inventory.LLDPTLV
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, inventory.LLDPTLV{Type: pairs[i].(int), Value: pairs[i+1].(string)})
	}
	return out
}

// The TLVs of Ironic's LLDP processing tests (ironic's ParseLLDPTestCase
// test_all_valid_data), with what Ironic decodes from them.
func TestDecodeIronicVector(t *testing.T) {
	n, err := Decode(tlvs(
		1, "04112233aabbcc",
		2, "07373334",
		3, "003c",
		4, "686f737430322e6c61622e656e6720706f727420332028426f6e6429",
		5, "737730312d646973742d31622d623132",
		6, "4e6574776f726b732c20496e632e20353530302c2076657273696f6e203132204275696c6420646174653a20323031342d30332d31332030383a33383a33302055544320",
		7, "00140014",
		8, "0501c000020f020000000000",
		8, "110220010db885a3000000008a2e03707334020000000000",
		8, "0706aa11bb22cc3302000003e900",
		127, "00120f01036c110010",
		127, "00120f030300000002",
		127, "00120f0405ea",
		127, "0080c2010066",
		127, "0080c20206000a",
		127, "0080c202060014",
		127, "0080c204080026424203000000",
		127, "0080c203006507766c616e313031",
		127, "0080c203006607766c616e313032",
		127, "0080c203006807766c616e313034",
		127, "0080c2060058",
		0, "",
	))
	if err != nil {
		t.Fatal(err)
	}
	ttl, pvid, mtu := 60, 102, 1514
	want := Neighbor{
		ChassisID: "11:22:33:aa:bb:cc", ChassisIDSubtype: "mac address",
		PortID: "734", PortIDSubtype: "local",
		TTLSeconds:          &ttl,
		PortDescription:     "host02.lab.eng port 3 (Bond)",
		SystemName:          "sw01-dist-1b-b12",
		SystemDescription:   "Networks, Inc. 5500, version 12 Build date: 2014-03-13 08:38:30 UTC ",
		Capabilities:        []string{"Bridge", "Router"},
		EnabledCapabilities: []string{"Bridge", "Router"},
		ManagementAddresses: []string{"192.0.2.15", "2001:db8:85a3::8a2e:370:7334", "aa:11:bb:22:cc:33"},
		PortVLANID:          &pvid,
		VLANs:               []VLAN{{101, "vlan101"}, {102, "vlan102"}, {104, "vlan104"}},
		MTU:                 &mtu,
		LinkAggregation:     &LinkAggregation{Supported: true, Enabled: true, PortID: 2},
		// MAC/PHY status, two port-and-protocol VLAN IDs, protocol identity
		// and management VID.
		Unknown: 5,
	}
	if !reflect.DeepEqual(n, want) {
		t.Errorf("got  %+v\nwant %+v", n, want)
	}
}

func TestDecodeChassisIDs(t *testing.T) {
	for _, tc := range []struct{ hex, sub, id string }{
		{"0501c000020f", "network address", "192.0.2.15"},
		{"0773773031", "local", "sw01"},
		{"0665746830", "interface name", "eth0"},
		{"0902abcd", "subtype 9", "\\x02\xab\xcd"},
	} {
		n, err := Decode(tlvs(1, tc.hex))
		if err != nil {
			t.Fatal(err)
		}
		if n.ChassisIDSubtype != tc.sub || (tc.sub != "subtype 9" && n.ChassisID != tc.id) {
			t.Errorf("%s: got %q %q, want %q %q", tc.hex, n.ChassisIDSubtype, n.ChassisID, tc.sub, tc.id)
		}
	}
}

func TestDecodeFirstWins(t *testing.T) {
	n, _ := Decode(tlvs(1, "04112233aabbcc", 1, "04332211ddeeff", 2, "07373334", 2, "07373435"))
	if n.ChassisID != "11:22:33:aa:bb:cc" || n.PortID != "734" {
		t.Errorf("got chassis %q port %q, want the first of each", n.ChassisID, n.PortID)
	}
}

// Truncated and malformed TLVs (Ironic's test_null_strings,
// test_truncated_int, test_invalid_ip, test_truncated_mac) become named
// problems, never a panic or a wrong value.
func TestDecodeMalformed(t *testing.T) {
	n, err := Decode(tlvs(
		1, "04",
		4, "",
		5, "",
		127, "0080c203006507",
		127, "00120f04",
		127, "0080c201",
		8, "0501",
		8, "0506",
		127, "00120f",
		3, "00",
		7, "0014",
		127, "0080c20700",
		2, "03aabb",
	))
	if err != nil {
		t.Fatal(err)
	}
	if n.ChassisID != "" || n.PortVLANID != nil || n.MTU != nil || len(n.VLANs) != 0 ||
		len(n.ManagementAddresses) != 0 || n.TTLSeconds != nil || n.LinkAggregation != nil || n.PortID != "" {
		t.Errorf("malformed TLVs produced values: %+v", n)
	}
	if len(n.Problems) != 11 {
		t.Errorf("want 11 problems, got %d:\n%s", len(n.Problems), strings.Join(n.Problems, "\n"))
	}
	for _, p := range n.Problems {
		if !strings.HasPrefix(p, "TLV ") {
			t.Errorf("problem does not name its TLV: %q", p)
		}
	}
}

func TestDecodeUnknownOrgSpecific(t *testing.T) {
	n, err := Decode(tlvs(127, "00906901425030323134323530393236", 127, "23ac0074657374", 127, "00120e010300010000", 10, "04112233aabbcc"))
	if err != nil {
		t.Fatal(err)
	}
	if n.Unknown != 4 || len(n.Problems) != 0 {
		t.Errorf("want 4 unknown TLVs and no problems, got %+v", n)
	}
}

func TestTextEscapesControlBytes(t *testing.T) {
	for in, want := range map[string]string{
		"switch\x00\x00":    "switch",
		"a\x1b[2Jb":         `a\x1b[2Jb`,
		"caf\xc3\xa9":       "café",
		"bad \xff utf8":     "bad \uFFFD utf8",
		"tab\tis fine":      "tab\tis fine",
		"":                  "",
		"del\x7f":           `del\x7f`,
		"nul\x00inside\x00": `nul\x00inside`,
	} {
		if got := text([]byte(in)); got != want {
			t.Errorf("text(%q) = %q, want %q", in, got, want)
		}
	}
}
