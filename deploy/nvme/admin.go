package nvme

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
)

// Device sends admin commands to one NVMe controller, through its
// character device (/dev/nvmeN) or one of its namespaces' block devices.
type Device interface {
	// Admin submits cmd with data as its buffer (filled by a
	// controller-to-host command, sent by a host-to-controller one; nil
	// when the command transfers nothing) and waits for its completion.
	// A completion with an error status is a *StatusError; the
	// completion's dword 0 is left in cmd.Result.
	Admin(cmd *Command, data []byte) error
	// NamespaceID is the namespace of a block device (NVME_IOCTL_ID).
	NamespaceID() (uint32, error)
}

// submit runs one command after checking ctx: the ioctl itself cannot be
// interrupted, so a context that ended before it stops it from starting.
func submit(ctx context.Context, d Device, cmd *Command, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s not sent: %w", cmd.String(), err)
	}
	if len(data) != int(cmd.DataLen) {
		return fmt.Errorf("%s: buffer of %d bytes for a %d-byte transfer", cmd.String(), len(data), cmd.DataLen)
	}
	return d.Admin(cmd, data)
}

// IdentifyController reads the controller's Identify data.
func IdentifyController(ctx context.Context, d Device) (Controller, error) {
	cmd := IdentifyCommand(CNSController, 0)
	buf := make([]byte, IdentifySize)
	if err := submit(ctx, d, &cmd, buf); err != nil {
		return Controller{}, err
	}
	return ParseController(buf)
}

// IdentifyNamespace reads namespace nsid's Identify data.
func IdentifyNamespace(ctx context.Context, d Device, nsid uint32) (Namespace, error) {
	cmd := IdentifyCommand(CNSNamespace, nsid)
	buf := make([]byte, IdentifySize)
	if err := submit(ctx, d, &cmd, buf); err != nil {
		return Namespace{}, err
	}
	return ParseNamespace(buf)
}

// Secure Erase Settings of Format NVM.
const (
	SESNone     = 0
	SESUserData = 1
	SESCrypto   = 2
)

// FormatTimeoutMS bounds one Format NVM: nvme-cli's default for format, so
// a drive IPA's nvme-cli call could format is given the same time. On
// expiry the kernel aborts the command and resets the controller.
const FormatTimeoutMS = 600_000

// FormatCommand formats namespace nsid with the secure erase setting ses,
// keeping its current LBA format, metadata setting and protection
// information (what ns reports). nvme-cli's `format -s N` (IPA's call)
// keeps the LBA format too but sends MSET, PI and PIL as 0, which would
// turn end-to-end protection off on a namespace formatted with it; an
// erase should leave the drive as it was configured, so they are kept.
func FormatCommand(nsid uint32, ns Namespace, ses uint8) Command {
	lbaf := uint32(ns.LBAFormat())
	cdw10 := lbaf&0x0f | // LBAF bits 3:0
		uint32(ns.FLBAS>>4&1)<<4 | // MSET
		uint32(ns.DPS&7)<<5 | // PI
		uint32(ns.DPS>>3&1)<<8 | // PIL
		uint32(ses&7)<<9 | // SES
		(lbaf>>4&3)<<12 // LBAFU
	return Command{Opcode: OpFormatNVM, NSID: nsid, CDW10: cdw10, TimeoutMS: FormatTimeoutMS}
}

// Format runs Format NVM on nsid with ses, keeping the namespace's
// current format.
func Format(ctx context.Context, d Device, nsid uint32, ns Namespace, ses uint8) error {
	cmd := FormatCommand(nsid, ns, ses)
	return submit(ctx, d, &cmd, nil)
}

// Sanitize actions (SANACT).
const (
	SanitizeExitFailure = 1
	SanitizeBlockErase  = 2
	SanitizeOverwrite   = 3
	SanitizeCryptoErase = 4
)

// SanitizeCommand starts a sanitize with action (no-deallocate and the
// overwrite options clear). The namespace ID is not used by a sanitize,
// which always covers the whole NVM subsystem.
func SanitizeCommand(action uint8) Command {
	return Command{Opcode: OpSanitize, CDW10: uint32(action & 7)}
}

// Sanitize starts a sanitize; the controller completes the command once
// the operation has begun, and reports its end in the Sanitize Status log.
func Sanitize(ctx context.Context, d Device, action uint8) error {
	cmd := SanitizeCommand(action)
	return submit(ctx, d, &cmd, nil)
}

// Log page identifiers.
const LIDSanitizeStatus = 0x81

// SanitizeLogSize is the size of the Sanitize Status log page.
const SanitizeLogSize = 512

// nsidAll is the broadcast namespace ID, for log pages about the
// controller or subsystem.
const nsidAll = 0xffffffff

// GetLogPageCommand reads size bytes (a multiple of 4) of log page lid.
func GetLogPageCommand(lid uint8, size uint32) Command {
	numd := size/4 - 1 // 0's based dword count
	return Command{Opcode: OpGetLogPage, NSID: nsidAll, DataLen: size,
		CDW10: uint32(lid) | (numd&0xffff)<<16, CDW11: numd >> 16}
}

// SanitizeLog is the part of the Sanitize Status log page the erase reads.
type SanitizeLog struct {
	// Progress is SPROG: the fraction done of a running sanitize, as a
	// numerator over 65536.
	Progress uint16
	// Status is SSTAT: bits 2:0 the most recent sanitize's state, 7:3
	// overwrite passes, 8 Global Data Erased.
	Status uint16
}

// Sanitize states (SSTAT bits 2:0).
const (
	SanitizeNever           = 0
	SanitizeDone            = 1
	SanitizeInProgress      = 2
	SanitizeFailed          = 3
	SanitizeDoneDeallocated = 4 // done; No-Deallocate was asked but blocks were deallocated
)

// SSTATGlobalDataErased is SSTAT bit 8: no user data has been written in
// the subsystem since the last successful sanitize (nor ever, when no
// sanitize ran).
const SSTATGlobalDataErased = 1 << 8

// State is SSTAT's bits 2:0.
func (l SanitizeLog) State() int { return int(l.Status & 7) }

// ParseSanitizeLog reads a Sanitize Status log page.
func ParseSanitizeLog(b []byte) (SanitizeLog, error) {
	if len(b) != SanitizeLogSize {
		return SanitizeLog{}, fmt.Errorf("nvme: Sanitize Status log page is %d bytes, not %d", len(b), SanitizeLogSize)
	}
	return SanitizeLog{Progress: binary.LittleEndian.Uint16(b[0:]), Status: binary.LittleEndian.Uint16(b[2:])}, nil
}

// SanitizeStatus reads the Sanitize Status log page.
func SanitizeStatus(ctx context.Context, d Device) (SanitizeLog, error) {
	cmd := GetLogPageCommand(LIDSanitizeStatus, SanitizeLogSize)
	buf := make([]byte, SanitizeLogSize)
	if err := submit(ctx, d, &cmd, buf); err != nil {
		return SanitizeLog{}, err
	}
	return ParseSanitizeLog(buf)
}

// IsStatus reports whether err carries an NVMe status and returns it.
func IsStatus(err error) (*StatusError, bool) {
	var s *StatusError
	ok := errors.As(err, &s)
	return s, ok
}
