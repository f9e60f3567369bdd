package ata

import (
	"fmt"
)

// Sense is what a SCSI sense buffer says about an ATA PASS-THROUGH
// command: the sense key and additional sense code, and the ATA registers
// when the device returned them (the ATA Status Return descriptor 09h of
// descriptor-format sense, or the ATA fields of fixed-format sense).
type Sense struct {
	Key, ASC, ASCQ byte
	// HasATA is true when Status and Error hold the device's registers.
	HasATA bool
	Status byte // ATA STATUS: bit 0 ERR, bit 3 DRQ, bit 5 DF, bit 7 BSY
	Error  byte // ATA ERROR: bit 2 ABRT
	Count  byte
	Device byte
}

// ATA STATUS and ERROR bits (ACS-3 6.2, 6.3).
const (
	StatusErr  = 1 << 0
	StatusDRQ  = 1 << 3
	StatusDF   = 1 << 5
	StatusBusy = 1 << 7
	ErrorAbort = 1 << 2
)

// Sense keys (SPC-4 table 28) that matter here.
const (
	SenseNoSense        = 0x0
	SenseRecoveredError = 0x1
	SenseIllegalRequest = 0x5
	SenseAbortedCommand = 0xb
)

// ParseSense reads fixed (70h/71h) or descriptor (72h/73h) format sense
// data. Fixed-format sense carries the ATA registers of an ATA
// PASS-THROUGH when the ASC/ASCQ is 00h/1Dh (ATA PASS-THROUGH INFORMATION
// AVAILABLE) or the sense key is ABORTED COMMAND or RECOVERED ERROR
// (libata fills them then too): in the INFORMATION field (SAT-3 12.2.2.6)
// when the VALID bit says so, else where Linux before 6.10 puts them.
// Descriptor format carries them in descriptor 09h (SAT-3 12.2.2.7).
func ParseSense(b []byte) (Sense, error) {
	var s Sense
	if len(b) < 1 {
		return s, fmt.Errorf("sense data is empty")
	}
	switch b[0] & 0x7f {
	case 0x70, 0x71:
		if len(b) < 14 {
			return s, fmt.Errorf("fixed-format sense data is %d bytes, want at least 14", len(b))
		}
		s.Key, s.ASC, s.ASCQ = b[2]&0x0f, b[12], b[13]
		if (s.ASC == 0 && s.ASCQ == 0x1d) || s.Key == SenseAbortedCommand || s.Key == SenseRecoveredError {
			s.HasATA = true
			if b[0]&0x80 != 0 {
				// VALID: the INFORMATION field holds the registers, as
				// SAT-3 lays them out (Linux 6.10 and later).
				s.Error, s.Status, s.Device, s.Count = b[3], b[4], b[5], b[6]
			} else {
				// Linux before 6.10 (Debian bookworm's 6.1 among them)
				// leaves VALID clear and writes the registers 5 bytes
				// later, from byte 8: recorded in testdata/qemu.
				s.Error, s.Status, s.Device, s.Count = b[8], b[9], b[10], b[11]
			}
		}
		return s, nil
	case 0x72, 0x73:
		if len(b) < 8 {
			return s, fmt.Errorf("descriptor-format sense data is %d bytes, want at least 8", len(b))
		}
		s.Key, s.ASC, s.ASCQ = b[1]&0x0f, b[2], b[3]
		// Descriptors follow the 8-byte header, b[7] bytes of them; the
		// buffer may have been cut short by its size.
		end := min(len(b), 8+int(b[7]))
		for d := b[8:end]; len(d) >= 2; {
			n := 2 + int(d[1])
			if n > len(d) {
				return s, fmt.Errorf("sense descriptor %02xh claims %d bytes, %d remain", d[0], n, len(d))
			}
			if d[0] == 0x09 {
				if n < 14 {
					return s, fmt.Errorf("ATA Status Return descriptor is %d bytes, want 14", n)
				}
				s.HasATA = true
				s.Error, s.Count, s.Device, s.Status = d[3], d[5], d[12], d[13]
			}
			d = d[n:]
		}
		return s, nil
	}
	return s, fmt.Errorf("sense data response code %02xh is neither fixed (70h/71h) nor descriptor (72h/73h) format", b[0]&0x7f)
}

// Failed reports whether the ATA registers say the command failed: ERR or
// device fault set. DRQ alone is not a failure: QEMU's AHCI ends IDENTIFY
// with status 58h, which Linux reports as ABORTED COMMAND though the data
// arrived (testdata/qemu), and hdparm, too, fails a command on ERR only.
func (s Sense) Failed() bool {
	return s.HasATA && s.Status&(StatusErr|StatusDF) != 0
}

func (s Sense) String() string {
	str := fmt.Sprintf("sense key %xh, ASC/ASCQ %02xh/%02xh", s.Key, s.ASC, s.ASCQ)
	if s.HasATA {
		str += fmt.Sprintf(", ATA status %02xh, error %02xh", s.Status, s.Error)
		if s.Error&ErrorAbort != 0 && s.Status&StatusErr != 0 {
			str += " (command aborted)"
		}
	}
	return str
}
