// Package atatest simulates an ATA drive behind SG_IO for the tests of
// deploy/ata's callers.
package atatest

import (
	"bytes"
	"context"
	"fmt"

	"github.com/ironic-go/ironic-agent/deploy/ata"
)

// Drive simulates the ATA Security feature set of one drive (ACS-3
// 4.18) behind SG_IO, an ata.Passer: it decodes each ATA PASS-THROUGH CDB and data block
// and answers as libata does with CK_COND, descriptor sense carrying the
// ATA status, or an abort (status 51h, error 04h) for a refused command.
type Drive struct {
	// Identify is the drive's IDENTIFY DEVICE data; its security words are
	// replaced by the state.
	Identify []byte
	// The security state (word 128) and the user password.
	Supported, Enabled, Locked, Frozen, Enhanced bool
	Password                                     ata.Password
	// FailErase makes ERASE UNIT abort; StayEnabled leaves the password
	// set after a successful erase; NotATA refuses opcode 85h as a SAS
	// disk does.
	FailErase, StayEnabled, NotATA bool
	// Ops lists the commands received: the command's name, then the
	// password sent (quoted, zero bytes trimmed) and "enhanced".
	Ops []string
}

// Sense data as libata returns it with CK_COND.
var (
	// SenseOK is descriptor sense, RECOVERED ERROR 00h/1Dh, status 50h.
	SenseOK = []byte{0x72, 0x01, 0x00, 0x1d, 0, 0, 0, 0x0e, 0x09, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x50}
	// SenseAbort is descriptor sense, ABORTED COMMAND, status 51h,
	// error 04h (ABRT).
	SenseAbort = []byte{0x72, 0x0b, 0x00, 0x00, 0, 0, 0, 0x0e, 0x09, 0x0c, 0, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x51}
	// A SCSI disk's ILLEGAL REQUEST, invalid command operation code.
	SenseInvalidOpcode = []byte{0x70, 0x00, 0x05, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x20, 0x00, 0, 0, 0, 0}
)

func (d *Drive) Pass(_ context.Context, path string, r *ata.Request) (ata.Reply, error) {
	ok := ata.Reply{Status: 2, DriverStatus: 8, Sense: SenseOK}
	abort := ata.Reply{Status: 2, DriverStatus: 8, Sense: SenseAbort}
	if d.NotATA {
		d.Ops = append(d.Ops, "refused opcode 85h")
		return ata.Reply{Status: 2, DriverStatus: 8, Sense: SenseInvalidOpcode}, nil
	}
	op := r.CDB[14]
	var pw ata.Password
	name := map[byte]string{ata.OpIdentify: "IDENTIFY", ata.OpSecuritySetPassword: "SET PASSWORD", ata.OpSecurityUnlock: "UNLOCK",
		ata.OpSecurityErasePrepare: "ERASE PREPARE", ata.OpSecurityEraseUnit: "ERASE UNIT", ata.OpSecurityDisablePassword: "DISABLE PASSWORD"}[op]
	if r.Dir == ata.DirOut {
		if len(r.Data) != ata.SectorSize || r.Data[0]&1 != 0 {
			return ata.Reply{}, fmt.Errorf("sim: %s data block of %d bytes, word 0 %02x: want the user password's 512 bytes", name, len(r.Data), r.Data[0])
		}
		copy(pw[:], r.Data[2:34])
		name += fmt.Sprintf(" %q", bytes.TrimRight(pw[:], "\x00"))
		if op == ata.OpSecurityEraseUnit && r.Data[0]&2 != 0 {
			name += " enhanced"
		}
	}
	d.Ops = append(d.Ops, name)
	if op != ata.OpIdentify && (!d.Supported || d.Frozen && op != ata.OpSecurityUnlock) {
		return abort, nil
	}
	switch op {
	case ata.OpIdentify:
		if r.Dir != ata.DirIn || len(r.Data) != ata.SectorSize {
			return ata.Reply{}, fmt.Errorf("sim: IDENTIFY with direction %v, %d bytes", r.Dir, len(r.Data))
		}
		var w128 uint16
		for i, b := range []bool{d.Supported, d.Enabled, d.Locked, d.Frozen, false, d.Enhanced} {
			if b {
				w128 |= 1 << i
			}
		}
		// Erase times of 2 minutes, the enhanced one only when offered.
		copy(r.Data, WithSecurity(d.Identify, w128, 1, w128>>5&1))
	case ata.OpSecuritySetPassword:
		if d.Locked {
			return abort, nil
		}
		d.Password, d.Enabled = pw, true
	case ata.OpSecurityUnlock:
		if pw != d.Password {
			return abort, nil
		}
		d.Locked = false
	case ata.OpSecurityErasePrepare:
	case ata.OpSecurityEraseUnit:
		if d.FailErase || !d.Enabled || pw != d.Password || r.Data[0]&2 != 0 && !d.Enhanced {
			return abort, nil
		}
		if !d.StayEnabled {
			d.Enabled, d.Locked, d.Password = false, false, ata.Password{}
		}
	default:
		return abort, nil
	}
	return ok, nil
}

// WithSecurity returns IDENTIFY data b with word 128 set to w128 and the
// words that go with it (ATA8-ACS: 82 bit 1 feature set supported, 85 bit
// 1 enabled, 89 and 90 the erase times) and a correct integrity word
// (signature A5h and checksum).
func WithSecurity(b []byte, w128, erase89, erase90 uint16) []byte {
	b = bytes.Clone(b)
	put := func(w int, v uint16) { b[2*w], b[2*w+1] = byte(v), byte(v>>8) }
	get := func(w int) uint16 { return uint16(b[2*w]) | uint16(b[2*w+1])<<8 }
	if w128&1 != 0 {
		put(82, get(82)|1<<1)
	}
	put(89, erase89)
	put(90, erase90)
	put(85, get(85)&^(1<<1)|w128&(1<<1))
	put(128, w128)
	b[510] = 0xa5
	var sum byte
	for _, c := range b[:511] {
		sum += c
	}
	b[511] = -sum
	return b
}
