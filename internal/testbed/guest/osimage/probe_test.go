package main

import (
	"encoding/binary"
	"testing"
)

// isoImage is the start of an ISO 9660 image whose primary volume
// descriptor carries label.
func isoImage(label string) []byte {
	b := make([]byte, probeSize)
	d := b[16*2048:]
	d[0] = 1
	copy(d[1:], "CD001")
	d[6] = 1
	copy(d[40:72], label+"                                ")
	return b
}

// fatImage is a FAT boot sector (FAT32 when fat32) carrying label.
func fatImage(label string, fat32 bool) []byte {
	b := make([]byte, 512)
	binary.LittleEndian.PutUint16(b[11:], 512)
	b[13] = 4
	sig, lab, typ, name := 0x26, 0x2b, 0x36, "FAT16   "
	if fat32 {
		sig, lab, typ, name = 0x42, 0x47, 0x52, "FAT32   "
	} else {
		binary.LittleEndian.PutUint16(b[0x16:], 32)
	}
	b[sig] = 0x29
	copy(b[lab:lab+11], label+"           ")
	copy(b[typ:], name)
	b[510], b[511] = 0x55, 0xaa
	return b
}

func TestProbe(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"iso", isoImage("config-2"), "iso9660"},
		{"iso upper case", isoImage("CONFIG-2"), "iso9660"},
		{"iso other label", isoImage("cidata"), ""},
		{"fat16", fatImage("CONFIG-2", false), "vfat"},
		{"fat32", fatImage("config-2", true), "vfat"},
		{"fat other label", fatImage("ESP", true), ""},
		{"fat without signature", func() []byte { b := fatImage("config-2", true); b[0x42] = 0; return b }(), ""},
		{"zeros", make([]byte, probeSize), ""},
		{"short", []byte("CD001"), ""},
		{"empty", nil, ""},
	} {
		got, ok := probe(c.b)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s: probe = %q, %v; want %q", c.name, got, ok, c.want)
		}
	}
}

// FuzzProbe: any bytes a disk holds give an answer, never a panic, and a
// positive one only with the label.
func FuzzProbe(f *testing.F) {
	f.Add(isoImage("config-2"))
	f.Add(fatImage("config-2", true))
	f.Add(fatImage("CONFIG-2", false))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fstype, ok := probe(b)
		if ok != (fstype != "") {
			t.Fatalf("probe = %q, %v", fstype, ok)
		}
		if !ok {
			return
		}
		l, _ := isoLabel(b)
		if fstype == "vfat" {
			l, _ = fatLabel(b)
		}
		if len(l) != len(configDriveLabel) {
			t.Fatalf("probe found %s with label %q", fstype, l)
		}
	})
}
