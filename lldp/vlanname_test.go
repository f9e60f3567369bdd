package lldp

import (
	"encoding/hex"
	"testing"
)

// TestDecodeVLANName reads 802.1 VLAN Name TLVs whole and cut short: strict
// (Decode's) refuses a name shorter than its length; lenient (the
// ramdisk's VLAN step, as IPA) needs only the ID.
func TestDecodeVLANName(t *testing.T) {
	for _, tc := range []struct {
		name, value     string // the TLV value, hex
		strict, lenient VLAN
		strictErr       bool
		lenientErr      bool
	}{
		{name: "whole", value: "0080c20300640470726f76", strict: VLAN{100, "prov"}, lenient: VLAN{100, "prov"}},
		{name: "empty name", value: "0080c20300c800", strict: VLAN{200, ""}, lenient: VLAN{200, ""}},
		{name: "name cut short", value: "0080c203006404707266", strictErr: true, lenient: VLAN{100, "prf"}},
		{name: "no name length", value: "0080c20300c8", strictErr: true, lenient: VLAN{200, ""}},
		{name: "half an ID", value: "0080c20300", strictErr: true, lenientErr: true},
		{name: "no ID", value: "0080c203", strictErr: true, lenientErr: true},
	} {
		v, _ := hex.DecodeString(tc.value)
		info, ok := VLANNameInfo(v)
		if !ok {
			t.Fatalf("%s: not taken for a VLAN Name TLV", tc.name)
		}
		got, err := DecodeVLANName(info, false)
		if (err != nil) != tc.strictErr || err == nil && got != tc.strict {
			t.Errorf("%s: strict: %+v, %v; want %+v, error %v", tc.name, got, err, tc.strict, tc.strictErr)
		}
		got, err = DecodeVLANName(info, true)
		if (err != nil) != tc.lenientErr || err == nil && got != tc.lenient {
			t.Errorf("%s: lenient: %+v, %v; want %+v, error %v", tc.name, got, err, tc.lenient, tc.lenientErr)
		}
	}
	for _, h := range []string{"0080c20100c8", "00120f0300c8", "0080c2", ""} {
		v, _ := hex.DecodeString(h)
		if _, ok := VLANNameInfo(v); ok {
			t.Errorf("%s: taken for a VLAN Name TLV", h)
		}
	}
}

// FuzzDecodeVLANName: whatever strict decoding accepts, lenient decoding
// reads the same; lenient fails only without a whole VLAN ID.
func FuzzDecodeVLANName(f *testing.F) {
	for _, h := range []string{"00640470726f76", "00c800", "006404707266", "00c8", "00", ""} {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, info []byte) {
		strict, serr := DecodeVLANName(info, false)
		lenient, lerr := DecodeVLANName(info, true)
		if serr == nil && (lerr != nil || lenient != strict) {
			t.Fatalf("strict %+v, lenient %+v, %v", strict, lenient, lerr)
		}
		if (lerr != nil) != (len(info) < 2) {
			t.Fatalf("lenient error %v with %d bytes", lerr, len(info))
		}
	})
}
