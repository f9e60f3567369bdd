package ata

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"
)

// Identify is the 256-word IDENTIFY DEVICE data of a drive.
type Identify struct {
	Words [256]uint16
}

// ParseIdentify reads the 512 bytes IDENTIFY DEVICE returns (little-endian
// words). It refuses a short block, the data of an ATAPI or other non-ATA
// device (word 0 bit 15 set) and a block whose integrity word carries the
// signature A5h but does not sum to zero.
func ParseIdentify(b []byte) (Identify, error) {
	var id Identify
	if len(b) != SectorSize {
		return id, fmt.Errorf("IDENTIFY DEVICE data is %d bytes, want %d", len(b), SectorSize)
	}
	for i := range id.Words {
		id.Words[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	if id.Words[0]&(1<<15) != 0 {
		return id, fmt.Errorf("IDENTIFY DEVICE word 0 is %04xh: not an ATA device", id.Words[0])
	}
	// Word 255: signature A5h in bits 7:0 and a checksum that makes the
	// 512 bytes sum to 0; without the signature the word is unused.
	if byte(id.Words[255]) == 0xa5 {
		var sum byte
		for _, c := range b {
			sum += c
		}
		if sum != 0 {
			return id, fmt.Errorf("IDENTIFY DEVICE checksum fails (bytes sum to %02xh, want 0): the data is corrupt", sum)
		}
	}
	return id, nil
}

// Bytes returns the 512 bytes of id, as the drive sent them.
func (id Identify) Bytes() []byte {
	b := make([]byte, SectorSize)
	for i, w := range id.Words {
		binary.LittleEndian.PutUint16(b[2*i:], w)
	}
	return b
}

// str reads an ATA string: words whose first character is the high byte,
// space-padded.
func (id Identify) str(first, n int) string {
	b := make([]byte, 0, 2*n)
	for _, w := range id.Words[first : first+n] {
		b = append(b, byte(w>>8), byte(w))
	}
	return strings.TrimSpace(string(b))
}

// Model is words 27-46, Serial words 10-19, Firmware words 23-26.
func (id Identify) Model() string    { return id.str(27, 20) }
func (id Identify) Serial() string   { return id.str(10, 10) }
func (id Identify) Firmware() string { return id.str(23, 4) }

// Security is the Security feature set status of word 128 (ACS-3
// 7.12.7.67).
type Security struct {
	Supported     bool // bit 0
	Enabled       bool // bit 1: a user password is set
	Locked        bool // bit 2
	Frozen        bool // bit 3: security commands are refused until power cycle
	CountExpired  bool // bit 4: too many failed unlocks since power on
	EnhancedErase bool // bit 5: enhanced security erase supported
	MasterMaximum bool // bit 8: master password capability is maximum
}

// Security returns the drive's security status.
func (id Identify) Security() Security {
	w := id.Words[128]
	return Security{
		Supported:     w&(1<<0) != 0,
		Enabled:       w&(1<<1) != 0,
		Locked:        w&(1<<2) != 0,
		Frozen:        w&(1<<3) != 0,
		CountExpired:  w&(1<<4) != 0,
		EnhancedErase: w&(1<<5) != 0,
		MasterMaximum: w&(1<<8) != 0,
	}
}

// String lists the bits as hdparm's Security section names them, for
// errors and logs.
func (s Security) String() string {
	var parts []string
	for _, f := range []struct {
		on   bool
		name string
	}{
		{s.Supported, "supported"}, {s.Enabled, "enabled"}, {s.Locked, "locked"},
		{s.Frozen, "frozen"}, {s.CountExpired, "expired: security count"},
		{s.EnhancedErase, "supported: enhanced erase"},
	} {
		if f.on {
			parts = append(parts, f.name)
		} else {
			parts = append(parts, "not "+f.name)
		}
	}
	return strings.Join(parts, ", ")
}

// EraseTime is the drive's estimate of SECURITY ERASE UNIT's duration
// (word 89, or 90 for the enhanced erase; ACS-3 7.12.7.28): 2-minute units
// in bits 14:0 when bit 15 says the extended format, else in bits 7:0. ok
// is false when the drive gives no estimate, and for the short format's
// 255, which means "more than 508 minutes".
func (id Identify) EraseTime(enhanced bool) (d time.Duration, ok bool) {
	w := id.Words[89]
	if enhanced {
		w = id.Words[90]
	}
	var units uint16
	if w&(1<<15) != 0 {
		units = w & 0x7fff
	} else {
		units = w & 0xff
		if units == 0xff {
			return 0, false
		}
	}
	if units == 0 {
		return 0, false
	}
	return time.Duration(units) * 2 * time.Minute, true
}

// EraseTimeout is how long to wait for SECURITY ERASE UNIT: twice the
// drive's estimate plus ten minutes, or twelve hours without a usable
// estimate. A too-short timeout would abort the erase and leave the drive
// with its password set, so it errs long.
func (id Identify) EraseTimeout(enhanced bool) time.Duration {
	if d, ok := id.EraseTime(enhanced); ok {
		return 2*d + 10*time.Minute
	}
	return 12 * time.Hour
}
