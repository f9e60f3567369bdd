// Package vpdtest builds the SCSI VPD pages the kernel exports under a
// disk's device/ (vpd_pg80, vpd_pg83, vpd_pg89), for the collector's test
// trees and the udev derivation's tests: one home for both.
package vpdtest

import "fmt"

// Page builds a VPD page: the 4-byte header (page code, big-endian
// length) and payload.
func Page(code byte, payload []byte) []byte {
	return append([]byte{0, code, byte(len(payload) >> 8), byte(len(payload))}, payload...)
}

// Pad pads s with spaces to n bytes, or cuts it there, as the fixed-width
// INQUIRY and IDENTIFY fields are.
func Pad(s string, n int) string {
	return fmt.Sprintf("%-*.*s", n, n, s)
}

// IdentifyPage builds a VPD 0x89 (ATA information) page whose IDENTIFY
// DEVICE data carries model, serial and, unless 0, WWN the way an ATA
// drive stores them: byte-swapped words, the WWN in words 108-111 with
// word 87's valid bits.
func IdentifyPage(model, serial string, wwn uint64) []byte {
	id := make([]byte, 512)
	put := func(word int, s string, n int) {
		s = Pad(s, n)
		for i := 0; i < n/2; i++ {
			id[2*(word+i)] = s[2*i+1]
			id[2*(word+i)+1] = s[2*i]
		}
	}
	put(10, serial, 20)
	put(27, model, 40)
	if wwn != 0 {
		id[87*2], id[87*2+1] = 0x00, 0x41 // word 87: bits 14 and 8 set
		for i := 0; i < 4; i++ {
			w := uint16(wwn >> (48 - 16*i))
			id[2*(108+i)], id[2*(108+i)+1] = byte(w), byte(w>>8)
		}
	}
	payload := make([]byte, 56, 56+512)
	copy(payload[4:], "linux   libata          1234")
	return Page(0x89, append(payload, id...))
}
