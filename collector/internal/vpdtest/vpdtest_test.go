package vpdtest

import (
	"bytes"
	"testing"
)

func TestPage(t *testing.T) {
	if got := Page(0x80, []byte("AB")); !bytes.Equal(got, []byte{0, 0x80, 0, 2, 'A', 'B'}) {
		t.Errorf("Page = %v", got)
	}
	if got := Page(0x83, make([]byte, 300))[2:4]; !bytes.Equal(got, []byte{1, 44}) {
		t.Errorf("length of a 300-byte payload = %v, want big-endian 300", got)
	}
}

func TestPad(t *testing.T) {
	got := Pad("ab", 4) + "|" + Pad("abcdef", 4) + "|" + Pad("", 2) + "|" + Pad("abcd", 4)
	if want := "ab  |abcd|  |abcd"; got != want {
		t.Errorf("padded and cut: %q, want %q", got, want)
	}
}

func TestIdentifyPage(t *testing.T) {
	p := IdentifyPage("LAB SATA HDD", "SER1", 0x5000cca000000b01)
	if len(p) != 4+56+512 || p[1] != 0x89 {
		t.Fatalf("page of %d bytes, code %#x", len(p), p[1])
	}
	id := p[4+56:]
	// Words 10 on, the serial, each byte-swapped: "SER1" is stored "ES1R".
	if string(id[20:24]) != "ES1R" {
		t.Errorf("serial words %q", id[20:24])
	}
	if id[87*2+1] != 0x41 || id[108*2] != 0x00 || id[108*2+1] != 0x50 || id[111*2] != 0x01 || id[111*2+1] != 0x0b {
		t.Errorf("WWN words % x", id[216:224])
	}
	if z := IdentifyPage("m", "s", 0)[4+56:]; z[87*2+1] != 0 {
		t.Errorf("no WWN, but word 87 = %#x", z[87*2+1])
	}
}
