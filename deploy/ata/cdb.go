// Package ata sends ATA commands to a disk through the SCSI layer: each
// command becomes a SCSI ATA PASS-THROUGH(16) CDB (SAT-3, opcode 85h),
// which Linux's libata (and SAT bridges) translate back into the ATA
// command. It covers what an ATA Security Erase needs: IDENTIFY DEVICE and
// the Security feature set (SET PASSWORD, UNLOCK, ERASE PREPARE, ERASE
// UNIT, DISABLE PASSWORD).
//
// The package is three pure parts and one ioctl: CDB and data-block
// builders, the IDENTIFY DEVICE parser and the sense-data parser, and the
// SG_IO ioctl behind the Passer interface, so the callers' decisions are
// tested with a simulated drive.
package ata

// Protocol is the ATA PASS-THROUGH PROTOCOL field (SAT-3 table 139).
type Protocol byte

const (
	ProtocolNonData Protocol = 3
	ProtocolPIOIn   Protocol = 4
	ProtocolPIOOut  Protocol = 5
)

// ATA command codes (ACS-3).
const (
	OpIdentify                byte = 0xec
	OpSecuritySetPassword     byte = 0xf1
	OpSecurityUnlock          byte = 0xf2
	OpSecurityErasePrepare    byte = 0xf3
	OpSecurityEraseUnit       byte = 0xf4
	OpSecurityDisablePassword byte = 0xf6
)

// opName names a command in errors and logs.
func opName(op byte) string {
	switch op {
	case OpIdentify:
		return "IDENTIFY DEVICE"
	case OpSecuritySetPassword:
		return "SECURITY SET PASSWORD"
	case OpSecurityUnlock:
		return "SECURITY UNLOCK"
	case OpSecurityErasePrepare:
		return "SECURITY ERASE PREPARE"
	case OpSecurityEraseUnit:
		return "SECURITY ERASE UNIT"
	case OpSecurityDisablePassword:
		return "SECURITY DISABLE PASSWORD"
	}
	return "ATA command"
}

// SCSI operation code of ATA PASS-THROUGH(16).
const opATAPassThrough16 = 0x85

// CDB byte 2 bits (SAT-3 6.2.2).
const (
	cdb2CheckCondition = 1 << 5 // CK_COND: return the ATA registers as sense
	cdb2FromDevice     = 1 << 3 // T_DIR
	cdb2Blocks         = 1 << 2 // BYT_BLOK: the length counts 512-byte blocks
	cdb2LengthInCount  = 2      // T_LENGTH: the length is in the COUNT field
)

// Command is one 28-bit ATA command: its registers and protocol.
type Command struct {
	Protocol Protocol
	Command  byte
	Features byte
	Count    byte
	LBA      uint32 // 28 bits
	Device   byte
}

// SectorSize is the size of the one data block the PIO commands here move.
const SectorSize = 512

// CDB16 returns the ATA PASS-THROUGH(16) CDB for c. CK_COND is always set,
// as hdparm does, so the device's status and error registers come back
// even on success: that is how an aborted command is told from a done one
// when the transport reports GOOD. A PIO command moves Count 512-byte
// blocks, its direction from the protocol.
func CDB16(c Command) [16]byte {
	var b [16]byte
	b[0] = opATAPassThrough16
	b[1] = byte(c.Protocol) << 1 // EXTEND 0: a 28-bit command
	b[2] = cdb2CheckCondition
	switch c.Protocol {
	case ProtocolPIOIn:
		b[2] |= cdb2FromDevice | cdb2Blocks | cdb2LengthInCount
	case ProtocolPIOOut:
		b[2] |= cdb2Blocks | cdb2LengthInCount
	}
	b[4] = c.Features
	b[6] = c.Count
	b[8] = byte(c.LBA)
	b[10] = byte(c.LBA >> 8)
	b[12] = byte(c.LBA >> 16)
	// The device register carries LBA bits 27:24 of a 28-bit command.
	b[13] = c.Device | byte(c.LBA>>24)&0x0f
	b[14] = c.Command
	return b
}

// Password is the 32-byte password field of the security commands.
type Password [32]byte

// NewPassword lays s into a password field as hdparm does: its bytes from
// the start, zero-padded; longer than 32 bytes is an error.
func NewPassword(s string) (Password, bool) {
	var p Password
	if len(s) > len(p) {
		return p, false
	}
	copy(p[:], s)
	return p, true
}

// Who says which password a security command compares or sets.
type Who byte

const (
	User   Who = 0
	Master Who = 1
)

// PasswordBlock returns the 512-byte data block of SET PASSWORD, UNLOCK,
// DISABLE PASSWORD and ERASE UNIT (ACS-3 7.45-7.51): word 0 bit 0 the
// identifier (user or master), word 0 bit 1 enhanced erase (ERASE UNIT
// only), words 1-16 the password. For SET PASSWORD word 0 bit 8 is the
// security level (0 high, as hdparm's default) and word 17 the master
// password identifier, which a user password leaves 0.
func PasswordBlock(who Who, pw Password, enhanced bool) []byte {
	b := make([]byte, SectorSize)
	b[0] = byte(who) & 1
	if enhanced {
		b[0] |= 1 << 1
	}
	copy(b[2:34], pw[:])
	return b
}
