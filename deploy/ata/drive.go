package ata

import (
	"context"
	"fmt"
	"time"
)

// Direction is the data phase of a pass-through request.
type Direction int

const (
	DirNone Direction = iota
	DirIn             // device to host
	DirOut            // host to device
)

// Request is one SCSI command for a Passer.
type Request struct {
	CDB     [16]byte
	Dir     Direction
	Data    []byte // read into (DirIn) or sent (DirOut)
	Timeout time.Duration
}

// Reply is the SCSI-level outcome of a request.
type Reply struct {
	Status       byte   // SCSI status: 00h GOOD, 02h CHECK CONDITION
	HostStatus   uint16 // transport (0 = ok)
	DriverStatus uint16 // low bits: 08h DRIVER_SENSE
	Sense        []byte // the sense bytes written, if any
}

// Passer sends one SCSI request to the block device at path. SGIO is the
// Linux one; tests simulate a drive.
type Passer interface {
	Pass(ctx context.Context, path string, r *Request) (Reply, error)
}

// SCSI status codes (SAM-5) and the Linux driver status bit of sense data.
const (
	scsiGood           = 0x00
	scsiCheckCondition = 0x02
	driverSense        = 0x08
)

// CommandError is an ATA command the drive or the transport refused.
type CommandError struct {
	Path    string
	Command byte
	// Sense is the parsed sense data; HasSense says whether there was any.
	Sense    Sense
	HasSense bool
	Reason   string
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("ATA %s (%02Xh) on %s failed: %s", opName(e.Command), e.Command, e.Path, e.Reason)
	if e.HasSense {
		msg += " (" + e.Sense.String() + ")"
	}
	return msg
}

// Aborted reports whether the drive itself aborted the command (ERR with
// ABRT), as a drive does for an unsupported command or a wrong password.
func (e *CommandError) Aborted() bool {
	return e.HasSense && e.Sense.HasATA && e.Sense.Status&StatusErr != 0 && e.Sense.Error&ErrorAbort != 0
}

// Check turns a reply into nil or a *CommandError. A command succeeded
// when the transport and driver report no error, the SCSI status is GOOD
// or CHECK CONDITION, and any sense is either "ATA PASS-THROUGH
// INFORMATION AVAILABLE" (CK_COND's answer on success) or ATA registers
// with no error; sense that cannot be read is a failure, since it may
// hide an abort.
func Check(path string, op byte, r Reply) error {
	fail := func(reason string) error { return &CommandError{Path: path, Command: op, Reason: reason} }
	if r.HostStatus != 0 {
		return fail(fmt.Sprintf("transport error (host status %04xh)", r.HostStatus))
	}
	if r.DriverStatus&^driverSense&0x0f != 0 {
		return fail(fmt.Sprintf("driver error (driver status %04xh)", r.DriverStatus))
	}
	if r.Status != scsiGood && r.Status != scsiCheckCondition {
		return fail(fmt.Sprintf("SCSI status %02xh", r.Status))
	}
	if len(r.Sense) == 0 {
		if r.Status == scsiCheckCondition {
			return fail("CHECK CONDITION without sense data")
		}
		return nil
	}
	s, err := ParseSense(r.Sense)
	if err != nil {
		return fail(err.Error())
	}
	e := &CommandError{Path: path, Command: op, Sense: s, HasSense: true}
	switch {
	case s.Failed():
		e.Reason = "the drive reports an error"
		if s.Error&ErrorAbort != 0 {
			e.Reason = "the drive aborted it"
		}
		return e
	case s.HasATA:
		return nil
	case s.Key == SenseNoSense || s.Key == SenseRecoveredError:
		return nil
	case s.Key == SenseIllegalRequest:
		e.Reason = "the device does not accept ATA PASS-THROUGH (not an ATA drive, or a bridge without SAT)"
		return e
	}
	e.Reason = "the device returned an error"
	return e
}

// Drive sends ATA commands to the block device at Path through Passer.
type Drive struct {
	Path   string
	Passer Passer
}

// Short commands get hdparm's 15 seconds; the security commands other
// than ERASE UNIT finish at once on a drive.
const commandTimeout = 15 * time.Second

func (d Drive) do(ctx context.Context, c Command, dir Direction, data []byte, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ATA %s on %s: %w", opName(c.Command), d.Path, err)
	}
	r, err := d.Passer.Pass(ctx, d.Path, &Request{CDB: CDB16(c), Dir: dir, Data: data, Timeout: timeout})
	if err != nil {
		return fmt.Errorf("ATA %s (%02Xh) on %s: %w", opName(c.Command), c.Command, d.Path, err)
	}
	return Check(d.Path, c.Command, r)
}

// Identify sends IDENTIFY DEVICE and parses its data.
func (d Drive) Identify(ctx context.Context) (Identify, error) {
	b, err := d.IdentifyRaw(ctx)
	if err != nil {
		return Identify{}, err
	}
	id, err := ParseIdentify(b)
	if err != nil {
		return id, fmt.Errorf("%s: %w", d.Path, err)
	}
	return id, nil
}

// IdentifyRaw sends IDENTIFY DEVICE and returns its 512 bytes unparsed.
func (d Drive) IdentifyRaw(ctx context.Context) ([]byte, error) {
	b := make([]byte, SectorSize)
	c := Command{Protocol: ProtocolPIOIn, Command: OpIdentify, Count: 1}
	if err := d.do(ctx, c, DirIn, b, commandTimeout); err != nil {
		return nil, err
	}
	return b, nil
}

func (d Drive) passwordCommand(ctx context.Context, op byte, who Who, pw Password, enhanced bool, timeout time.Duration) error {
	c := Command{Protocol: ProtocolPIOOut, Command: op, Count: 1}
	return d.do(ctx, c, DirOut, PasswordBlock(who, pw, enhanced), timeout)
}

// SetPassword sets the user password with security level high (hdparm's
// --security-set-pass), which enables the Security feature set.
func (d Drive) SetPassword(ctx context.Context, pw Password) error {
	return d.passwordCommand(ctx, OpSecuritySetPassword, User, pw, false, commandTimeout)
}

// Unlock unlocks a locked drive with the user password.
func (d Drive) Unlock(ctx context.Context, pw Password) error {
	return d.passwordCommand(ctx, OpSecurityUnlock, User, pw, false, commandTimeout)
}

// DisablePassword removes the user password (the drive must be unlocked).
func (d Drive) DisablePassword(ctx context.Context, pw Password) error {
	return d.passwordCommand(ctx, OpSecurityDisablePassword, User, pw, false, commandTimeout)
}

// Erase sends SECURITY ERASE PREPARE and then SECURITY ERASE UNIT with the
// user password, as the standard requires the pair back to back; timeout
// bounds ERASE UNIT (Identify.EraseTimeout). The ioctl cannot be
// interrupted once sent: ctx is checked before each command only, since
// abandoning a running erase leaves the drive locked.
func (d Drive) Erase(ctx context.Context, pw Password, enhanced bool, timeout time.Duration) error {
	if err := d.do(ctx, Command{Protocol: ProtocolNonData, Command: OpSecurityErasePrepare}, DirNone, nil, commandTimeout); err != nil {
		return err
	}
	return d.passwordCommand(ctx, OpSecurityEraseUnit, User, pw, enhanced, timeout)
}
