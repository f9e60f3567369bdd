package collector

import "strings"

// Builders of the VPD pages the kernel exports (device/vpd_pg80,
// vpd_pg83, vpd_pg89) for the test trees.

// vpdPage builds a VPD page: header plus payload.
func vpdPage(code byte, payload []byte) []byte {
	return append([]byte{0, code, byte(len(payload) >> 8), byte(len(payload))}, payload...)
}

// identifyPage builds a VPD 0x89 page whose IDENTIFY data carries model,
// serial and WWN the way an ATA drive stores them.
func identifyPage(model, serial string, wwn uint64) []byte {
	id := make([]byte, 512)
	put := func(word int, s string, n int) {
		s = padTo(s, n)
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
	return vpdPage(0x89, append(payload, id...))
}

// padTo pads s with spaces to n bytes, or cuts it there, as the INQUIRY
// and IDENTIFY fields are.
func padTo(s string, n int) string {
	if len(s) >= n {
		return s[:n]
	}
	return s + strings.Repeat(" ", n-len(s))
}

// unhex is the value of one hex digit.
func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}
