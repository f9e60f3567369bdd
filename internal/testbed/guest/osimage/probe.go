package main

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// configDriveLabel is the label OpenStack gives a config drive.
const configDriveLabel = "config-2"

// probeSize is how much of a device probe reads: up to the end of the
// ISO 9660 primary volume descriptor (sector 16 of 2048 bytes).
const probeSize = 17 * 2048

// probe reports whether b, the start of a block device, holds a file
// system labelled config-2, and which: "iso9660" or "vfat" (the names
// mount(2) takes). Labels compare without case: FAT tools upper-case them.
func probe(b []byte) (string, bool) {
	if l, ok := isoLabel(b); ok && strings.EqualFold(l, configDriveLabel) {
		return "iso9660", true
	}
	if l, ok := fatLabel(b); ok && strings.EqualFold(l, configDriveLabel) {
		return "vfat", true
	}
	return "", false
}

// isoLabel is the volume identifier of an ISO 9660 primary volume
// descriptor (ECMA-119 8.4: type 1, "CD001", version 1 at sector 16).
func isoLabel(b []byte) (string, bool) {
	const pvd = 16 * 2048
	if len(b) < pvd+72 {
		return "", false
	}
	d := b[pvd:]
	if d[0] != 1 || string(d[1:6]) != "CD001" || d[6] != 1 {
		return "", false
	}
	return strings.TrimRight(string(d[40:72]), " \x00"), true
}

// fatLabel is the volume label of a FAT boot sector's extended BIOS
// parameter block: at 0x2b for FAT12/16, at 0x47 for FAT32 (sectors per
// FAT 0 in the old field), each behind the extended boot signature 0x29.
func fatLabel(b []byte) (string, bool) {
	if len(b) < 512 || b[510] != 0x55 || b[511] != 0xaa {
		return "", false
	}
	switch bps := binary.LittleEndian.Uint16(b[11:]); bps {
	case 512, 1024, 2048, 4096:
	default:
		return "", false
	}
	if spc := b[13]; spc == 0 || spc&(spc-1) != 0 {
		return "", false
	}
	sig, label, fsType := 0x26, 0x2b, 0x36
	if binary.LittleEndian.Uint16(b[0x16:]) == 0 {
		sig, label, fsType = 0x42, 0x47, 0x52
	}
	if b[sig] != 0x29 || !bytes.HasPrefix(b[fsType:fsType+8], []byte("FAT")) {
		return "", false
	}
	return strings.TrimRight(string(b[label:label+11]), " \x00"), true
}
