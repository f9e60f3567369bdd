package udev

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// SCSI Vital Product Data pages as the kernel exposes them in sysfs
// (device/vpd_pg80, device/vpd_pg83, device/vpd_pg89): the raw INQUIRY
// EVPD replies. udev's scsi_id and ata_id read the same pages over SG_IO;
// decoding them here lets the agent report the identical serial and WWN
// values on a system that runs no udev.

const (
	vpdUnitSerial = 0x80
	vpdDeviceID   = 0x83
	vpdATAInfo    = 0x89
)

// vpdPayload checks a VPD page header (byte 1 page code, bytes 2-3 page
// length) and returns the page's payload.
func vpdPayload(page []byte, code byte) ([]byte, error) {
	if len(page) < 4 {
		return nil, fmt.Errorf("VPD page 0x%02x: %d bytes, shorter than the 4-byte header", code, len(page))
	}
	if page[1] != code {
		return nil, fmt.Errorf("VPD page 0x%02x: header names page 0x%02x", code, page[1])
	}
	n := int(binary.BigEndian.Uint16(page[2:4]))
	if 4+n > len(page) {
		return nil, fmt.Errorf("VPD page 0x%02x: header says %d payload bytes, only %d present (truncated)", code, n, len(page)-4)
	}
	return page[4 : 4+n], nil
}

// parseVPD80 returns the product serial number of a Unit Serial Number
// page as the C programs that read it see it: up to the first NUL, padding
// kept (ATA serials come space-padded; callers trim as the program they
// imitate does).
func parseVPD80(page []byte) (string, error) {
	p, err := vpdPayload(page, vpdUnitSerial)
	if err != nil {
		return "", err
	}
	return cString(p), nil
}

// cString is b up to its first NUL byte: scsi_id and ata_id handle these
// fields as C strings, so a NUL-padded serial ends there.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Designator types, code sets and NAA formats of SPC-4 7.8.6 that scsi_id
// distinguishes.
const (
	desigVendorSpecific = 0
	desigT10Vendor      = 1
	desigEUI64          = 2
	desigNAA            = 3

	codeSetBinary = 1
	codeSetASCII  = 2

	naaIEEERegistered         = 5
	naaIEEERegisteredExtended = 6
	naaAny                    = 0xff
)

// designator is one Identification Descriptor of VPD page 0x83.
type designator struct {
	CodeSet     byte // low nibble of byte 0
	Association byte // bits 5-4 of byte 1: 0 LUN, 1 target port, 2 target device
	Type        byte // low nibble of byte 1
	Value       []byte
}

// parseVPD83 splits a Device Identification page into its designators.
// A designator that runs past the end of the page is an error: the page is
// truncated or garbled, and a half-read WWN must not be reported.
func parseVPD83(page []byte) ([]designator, error) {
	p, err := vpdPayload(page, vpdDeviceID)
	if err != nil {
		return nil, err
	}
	var out []designator
	for off := 0; off < len(p); {
		if off+4 > len(p) {
			return nil, fmt.Errorf("VPD page 0x83: designator header at offset %d cut off", off+4)
		}
		n := int(p[off+3])
		if off+4+n > len(p) {
			return nil, fmt.Errorf("VPD page 0x83: designator at offset %d says %d bytes, only %d left", off+4, n, len(p)-off-4)
		}
		out = append(out, designator{
			CodeSet:     p[off] & 0x0f,
			Association: (p[off+1] >> 4) & 0x03,
			Type:        p[off+1] & 0x0f,
			Value:       p[off+4 : off+4+n],
		})
		off += 4 + n
	}
	return out, nil
}

// scsiIdent is what udev's scsi_id derives from page 0x83 (and the standard
// INQUIRY vendor/model): ID_SERIAL, ID_SERIAL_SHORT before whitespace
// clean-up, and the WWN parts without their "0x".
type scsiIdent struct {
	Serial      string // id-type digit + identifier, e.g. "35000c500a1b2c3d4"
	SerialShort string // identifier only
	WWN         string // first 16 hex digits of an NAA identifier
	WWNExt      string // next 16 hex digits (NAA IEEE Registered Extended)
}

// scsiMaxSerial is scsi_id's MAX_SERIAL_LEN: longer identifiers are skipped.
const scsiMaxSerial = 256

var errNoDesignator = errors.New("VPD page 0x83 has no designator scsi_id would use")

// scsiIDFromVPD83 reproduces scsi_id's choice of identifier. vendor and
// model are the standard INQUIRY strings (8 and 16 characters, padded with
// spaces), needed only for vendor-specific designators.
func scsiIDFromVPD83(page []byte, vendor, model string) (scsiIdent, error) {
	// EMC Symmetrix models answer in the SCSI-2 layout: the WWN follows the
	// 4-byte header directly and byte 6 is not the reserved zero of an
	// SPC-2/3 designator header.
	if len(page) >= 7 && page[1] == vpdDeviceID && page[6] != 0 {
		n := int(page[3])
		if 4+n > len(page) {
			return scsiIdent{}, fmt.Errorf("VPD page 0x83 (SCSI-2 layout): %d bytes announced, %d present", n, len(page)-4)
		}
		s := "3" + fmt.Sprintf("%x", page[4:4+n])
		if len(s) > scsiMaxSerial-3 {
			s = s[:scsiMaxSerial-3]
		}
		return scsiIdent{Serial: s, SerialShort: s}, nil
	}
	ds, err := parseVPD83(page)
	if err != nil {
		return scsiIdent{}, err
	}
	// scsi_id's priority list (systemd src/udev/scsi_id/scsi_serial.c,
	// id_search_list, without the target-group entry that names no
	// identifier): the first entry matching any designator wins, designators
	// examined in page order.
	search := [...]struct{ typ, naa, codeSet byte }{
		{desigNAA, naaIEEERegisteredExtended, codeSetBinary},
		{desigNAA, naaIEEERegisteredExtended, codeSetASCII},
		{desigNAA, naaIEEERegistered, codeSetBinary},
		{desigNAA, naaIEEERegistered, codeSetASCII},
		{desigNAA, naaAny, codeSetBinary},
		{desigNAA, naaAny, codeSetASCII},
		{desigEUI64, naaAny, codeSetBinary},
		{desigEUI64, naaAny, codeSetASCII},
		{desigT10Vendor, naaAny, codeSetBinary},
		{desigT10Vendor, naaAny, codeSetASCII},
		{desigVendorSpecific, naaAny, codeSetBinary},
		{desigVendorSpecific, naaAny, codeSetASCII},
	}
	for _, want := range search {
		for _, d := range ds {
			if d.Association != 0 || d.Type != want.typ || d.CodeSet != want.codeSet {
				continue
			}
			if want.naa != naaAny && (len(d.Value) == 0 || d.Value[0]>>4 != want.naa) {
				continue
			}
			n := len(d.Value)
			if d.CodeSet != codeSetASCII {
				n *= 2
			}
			n += 2
			if d.Type == desigVendorSpecific {
				n += 8 + 16
			}
			if n > scsiMaxSerial {
				continue
			}
			var id string
			if d.CodeSet == codeSetASCII {
				id = cString(d.Value)
			} else {
				id = fmt.Sprintf("%x", d.Value)
			}
			prefix := string("0123456789abcdef"[d.Type])
			if d.Type == desigVendorSpecific {
				prefix += padTo(vendor, 8) + padTo(model, 16)
			}
			out := scsiIdent{Serial: prefix + id, SerialShort: id}
			if d.Type == desigNAA {
				out.WWN = cut(id, 0, 16)
				out.WWNExt = cut(id, 16, 32)
			}
			return out, nil
		}
	}
	return scsiIdent{}, errNoDesignator
}

func padTo(s string, n int) string {
	if len(s) >= n {
		return s[:n]
	}
	return s + strings.Repeat(" ", n-len(s))
}

// cut returns s[from:to] clipped to s.
func cut(s string, from, to int) string {
	if from >= len(s) {
		return ""
	}
	if to > len(s) {
		to = len(s)
	}
	return s[from:to]
}

// ataIdentity is the part of the ATA IDENTIFY DEVICE data udev's ata_id
// reports: model (words 27-46) and serial (words 10-19), still padded.
type ataIdentity struct {
	Model  string
	Serial string
}

// parseVPD89 extracts the IDENTIFY DEVICE data the SCSI/ATA translation
// layer (libata) returns in the ATA Information page: 60 bytes of page
// header, SAT identification and signature, then the 512-byte IDENTIFY
// block. ATA strings store two characters per 16-bit little-endian word,
// first character in the high byte.
func parseVPD89(page []byte) (ataIdentity, error) {
	p, err := vpdPayload(page, vpdATAInfo)
	if err != nil {
		return ataIdentity{}, err
	}
	const identifyAt = 60 - 4
	if len(p) < identifyAt+512 {
		return ataIdentity{}, fmt.Errorf("VPD page 0x89: %d payload bytes, IDENTIFY data needs %d", len(p), identifyAt+512)
	}
	id := p[identifyAt : identifyAt+512]
	return ataIdentity{Model: ataString(id, 27, 40), Serial: ataString(id, 10, 20)}, nil
}

func ataString(identify []byte, word, n int) string {
	b := make([]byte, 0, n)
	for i := 0; i < n/2; i++ {
		w := identify[2*(word+i):]
		b = append(b, w[1], w[0])
	}
	return cString(b)
}
