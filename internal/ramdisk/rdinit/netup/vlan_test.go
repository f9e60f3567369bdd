package netup

import (
	"encoding/hex"
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/lldp"
)

func TestParseVLANs(t *testing.T) {
	got, errs := ParseVLANs(" eth0.100, all,,ens3 ,52:54:00:AB:CD:EF.7,eth1.4094")
	want := []VLANRequest{
		{Entry: "eth0.100", Parent: "eth0", ID: 100},
		{Entry: "all", All: true},
		{Entry: "ens3", Parent: "ens3"},
		{Entry: "52:54:00:AB:CD:EF.7", Parent: "52:54:00:ab:cd:ef", MAC: true, ID: 7},
		{Entry: "eth1.4094", Parent: "eth1", ID: 4094},
	}
	if len(errs) != 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v\nwant %+v", got, errs, want)
	}
	if got, errs := ParseVLANs(""); got != nil || errs != nil {
		t.Errorf("empty: %+v %v", got, errs)
	}
	// Each bad entry is named, and the good ones around it stay.
	for _, bad := range []struct{ entry, why string }{
		{"eth0.abc", "not a number"},
		{"eth0.", "not a number"},
		{"eth0.-5", "not a number"},
		{"eth0.0", "not from 1 to 4094"},
		{"eth0.4095", "not from 1 to 4094"},
		{"eth0.99999999999999999999", "not from 1 to 4094"},
		{"eth0.1.2", "not a number"},
		{".100", "no interface name"},
		{"a/b.100", "character"},
		{"sixteen-bytes-xx.1", "longer than 15"},
		{"52:54:00:ab:cd:ef", "needs a VLAN ID"},
		{"eth:0.5", "character"},
		{"ALL", ""}, // IPA compares with "all" exactly: a bare interface name
	} {
		got, errs := ParseVLANs("eth9.9," + bad.entry + ",eth8.8")
		if bad.why == "" {
			if len(errs) != 0 || len(got) != 3 || got[1].Parent != bad.entry {
				t.Errorf("%q: %+v %v", bad.entry, got, errs)
			}
			continue
		}
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), `"`+bad.entry+`"`) || !strings.Contains(errs[0].Error(), bad.why) ||
			!strings.Contains(errs[0].Error(), ParamVLANs) {
			t.Errorf("%q: errors %v, want one naming the entry and %q", bad.entry, errs, bad.why)
		}
		if len(got) != 2 || got[0].Entry != "eth9.9" || got[1].Entry != "eth8.8" {
			t.Errorf("%q: the good entries around it: %+v", bad.entry, got)
		}
	}
}

func TestAnnouncedVLANs(t *testing.T) {
	tlv := func(typ int, h string) inventory.LLDPTLV { return inventory.LLDPTLV{Type: typ, Value: h} }
	name := func(id uint16, n string) inventory.LLDPTLV {
		return tlv(127, "0080c203"+hex.EncodeToString([]byte{byte(id >> 8), byte(id), byte(len(n))})+hex.EncodeToString([]byte(n)))
	}
	ids, bad := announcedVLANs([]inventory.LLDPTLV{
		tlv(1, "04525400123456"),
		tlv(127, "0080c2010064"), // Port VLAN ID 100: the untagged VLAN, not created
		name(100, "prov"),
		name(200, "storage"),
		name(100, "prov again"),
		tlv(127, "0080c20300c8"), // cut short after the ID (IPA still reads it)
		tlv(127, "0080c2030f"),   // too short for an ID
		tlv(127, "00120f0300012c"),
		name(0, "zero"),
		name(4095, "reserved"),
		tlv(127, "0080c2030123"),
		tlv(0, ""),
	})
	if !reflect.DeepEqual(ids, []int{100, 200, 0x123}) || !reflect.DeepEqual(bad, []int{0, 4095}) {
		t.Errorf("ids %v, bad %v", ids, bad)
	}
	if ids, bad := announcedVLANs([]inventory.LLDPTLV{tlv(127, "zz")}); ids != nil || bad != nil {
		t.Errorf("not hex: %v %v", ids, bad)
	}
}

func FuzzParseVLANs(f *testing.F) {
	for _, s := range []string{"all", "eth0.100,eth1", "52:54:00:ab:cd:ef.7", "eth0.4095,.1,a/b.2", "x.1.2, ,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		reqs, errs := ParseVLANs(s)
		if len(reqs)+len(errs) > len(splitList(s)) {
			t.Fatalf("%q: %d requests and %d errors from %d entries", s, len(reqs), len(errs), len(splitList(s)))
		}
		for _, r := range reqs {
			switch {
			case r.All:
				if r.Parent != "" || r.ID != 0 {
					t.Fatalf("%q: %+v", s, r)
				}
			case r.ID != 0 && (r.ID < minVLANID || r.ID > maxVLANID), r.Parent == "", r.MAC && r.ID == 0:
				t.Fatalf("%q: %+v", s, r)
			case !r.MAC:
				if err := checkLinkName(r.Parent); err != nil {
					t.Fatalf("%q: %+v: %v", s, r, err)
				}
			}
		}
	})
}

// FuzzAnnouncedVLANs feeds received frames (outside bytes) through the
// LLDP split and the VLAN reading: IDs come out in range and once each.
func FuzzAnnouncedVLANs(f *testing.F) {
	hdr := "0180c200000e525400123456" + "88cc"
	for _, h := range []string{
		hdr + "0207045254001234560403050731fe080080c20300640470726f76fe060080c2010064fe050080c20300c80000",
		hdr + "fe040080c203", hdr + "fe060080c2030fff0000", "",
	} {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		ids, bad := announcedVLANs(lldp.ParseFrame(frame))
		seen := map[int]bool{}
		for _, id := range ids {
			if id < minVLANID || id > maxVLANID || seen[id] {
				t.Fatalf("ids %v", ids)
			}
			seen[id] = true
		}
		for _, id := range bad {
			if id >= minVLANID && id <= maxVLANID {
				t.Fatalf("bad %v", bad)
			}
		}
	})
}
