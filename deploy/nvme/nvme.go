// Package nvme sends NVMe admin commands through the Linux kernel's
// NVME_IOCTL_ADMIN_CMD ioctl, without nvme-cli: the command layout
// (struct nvme_admin_cmd of include/uapi/linux/nvme_ioctl.h), builders of
// the commands the erase steps need (Identify, Format NVM, Sanitize, Get
// Log Page), and parsers of their replies (NVMe Base Specification 2.0).
//
// The ioctl sits behind the small Device interface so the decisions built
// on it can be tested with recorded exchanges (Exchange, Replay).
package nvme

import (
	"encoding/binary"
	"fmt"
)

// Admin command opcodes (NVMe Base Specification, figure "Opcodes for
// Admin Commands").
const (
	OpGetLogPage = 0x02
	OpIdentify   = 0x06
	OpFormatNVM  = 0x80
	OpSanitize   = 0x84
)

// CommandSize is the size of struct nvme_admin_cmd (nvme_passthru_cmd).
const CommandSize = 72

// Command is struct nvme_admin_cmd without its two buffer pointers (addr,
// metadata), which the ioctl fills in from the data it is given.
type Command struct {
	Opcode    uint8
	Flags     uint8
	NSID      uint32
	CDW2      uint32
	CDW3      uint32
	DataLen   uint32 // bytes of the data buffer
	CDW10     uint32
	CDW11     uint32
	CDW12     uint32
	CDW13     uint32
	CDW14     uint32
	CDW15     uint32
	TimeoutMS uint32 // 0: the kernel's admin_timeout (60 s)
	// Result is dword 0 of the completion, written back by the kernel.
	Result uint32
}

// Marshal lays c out as the kernel reads it (native byte order, which is
// little endian on every architecture the agent ships for), with addr set
// to the data buffer's address.
func (c *Command) Marshal(addr uint64) [CommandSize]byte {
	var b [CommandSize]byte
	le := binary.LittleEndian
	b[0] = c.Opcode
	b[1] = c.Flags
	le.PutUint32(b[4:], c.NSID)
	le.PutUint32(b[8:], c.CDW2)
	le.PutUint32(b[12:], c.CDW3)
	// metadata (16..23) and metadata_len (32..35) stay 0: no command here
	// transfers separate metadata.
	le.PutUint64(b[24:], addr)
	le.PutUint32(b[36:], c.DataLen)
	for i, v := range []uint32{c.CDW10, c.CDW11, c.CDW12, c.CDW13, c.CDW14, c.CDW15} {
		le.PutUint32(b[40+4*i:], v)
	}
	le.PutUint32(b[64:], c.TimeoutMS)
	le.PutUint32(b[68:], c.Result)
	return b
}

// UnmarshalCommand reads a struct nvme_admin_cmd; the buffer pointers are
// dropped, and a command with separate metadata is refused since none of
// this package's commands has any.
func UnmarshalCommand(b []byte) (Command, error) {
	if len(b) != CommandSize {
		return Command{}, fmt.Errorf("nvme: a command is %d bytes, not %d", CommandSize, len(b))
	}
	le := binary.LittleEndian
	if le.Uint64(b[16:]) != 0 || le.Uint32(b[32:]) != 0 {
		return Command{}, fmt.Errorf("nvme: command with a metadata buffer")
	}
	c := Command{Opcode: b[0], Flags: b[1], NSID: le.Uint32(b[4:]), CDW2: le.Uint32(b[8:]), CDW3: le.Uint32(b[12:]),
		DataLen: le.Uint32(b[36:]), TimeoutMS: le.Uint32(b[64:]), Result: le.Uint32(b[68:])}
	for i, p := range []*uint32{&c.CDW10, &c.CDW11, &c.CDW12, &c.CDW13, &c.CDW14, &c.CDW15} {
		*p = le.Uint32(b[40+4*i:])
	}
	return c, nil
}

// String names the command for error messages.
func (c *Command) String() string {
	switch c.Opcode {
	case OpIdentify:
		switch c.CDW10 & 0xff {
		case CNSNamespace:
			return fmt.Sprintf("Identify Namespace (nsid %d)", c.NSID)
		case CNSController:
			return "Identify Controller"
		}
		return fmt.Sprintf("Identify (CNS %#02x)", c.CDW10&0xff)
	case OpFormatNVM:
		return fmt.Sprintf("Format NVM (nsid %d, SES %d)", c.NSID, c.CDW10>>9&7)
	case OpSanitize:
		return fmt.Sprintf("Sanitize (SANACT %d)", c.CDW10&7)
	case OpGetLogPage:
		return fmt.Sprintf("Get Log Page (LID %#02x)", c.CDW10&0xff)
	}
	return fmt.Sprintf("admin command %#02x", c.Opcode)
}

// StatusError is a command the controller completed with an error status:
// the ioctl's positive return value, the completion's Status Field without
// the phase bit, shifted down by one as the kernel passes it on (bits 7:0
// Status Code, 10:8 Status Code Type, 12:11 Command Retry Delay, 13 More,
// 14 Do Not Retry).
type StatusError struct {
	Command string
	Status  uint16
}

// Status code types and codes the erase steps tell apart.
const (
	sctGeneric         = 0
	sctCommandSpecific = 1

	scInvalidOpcode       = 0x01
	scInvalidField        = 0x02
	scSanitizeFailed      = 0x1c
	scSanitizeInProgress  = 0x1d
	scInvalidFormat       = 0x0a // command specific
	scInvalidLogPage      = 0x09 // command specific
	scInvalidNSOrFormat   = 0x0b
	scFormatInProgress    = 0x84
	scNamespaceNotReady   = 0x82 // generic
	scAccessDenied        = 0x86 // media and data integrity errors type (2)
	sctMediaDataIntegrity = 2
)

// SCT is the Status Code Type.
func (e *StatusError) SCT() int { return int(e.Status>>8) & 7 }

// SC is the Status Code.
func (e *StatusError) SC() int { return int(e.Status & 0xff) }

// DNR reports the Do Not Retry bit.
func (e *StatusError) DNR() bool { return e.Status&(1<<14) != 0 }

// InvalidField reports Invalid Field in Command (what a controller answers
// to a field value it does not support, such as an SES it cannot do).
func (e *StatusError) InvalidField() bool { return e.SCT() == sctGeneric && e.SC() == scInvalidField }

// Unsupported reports a command or log page the controller does not
// implement (Invalid Command Opcode, Invalid Log Page).
func (e *StatusError) Unsupported() bool {
	return (e.SCT() == sctGeneric && e.SC() == scInvalidOpcode) ||
		(e.SCT() == sctCommandSpecific && e.SC() == scInvalidLogPage)
}

func (e *StatusError) Error() string {
	what := ""
	switch {
	case e.SCT() == sctGeneric && e.SC() == scInvalidOpcode:
		what = ": Invalid Command Opcode"
	case e.InvalidField():
		what = ": Invalid Field in Command"
	case e.SCT() == sctGeneric && e.SC() == scInvalidNSOrFormat:
		what = ": Invalid Namespace or Format"
	case e.SCT() == sctGeneric && e.SC() == scSanitizeFailed:
		what = ": Sanitize Failed"
	case e.SCT() == sctGeneric && e.SC() == scSanitizeInProgress:
		what = ": Sanitize In Progress"
	case e.SCT() == sctGeneric && e.SC() == scFormatInProgress:
		what = ": Format In Progress"
	case e.SCT() == sctGeneric && e.SC() == scNamespaceNotReady:
		what = ": Namespace Not Ready"
	case e.SCT() == sctCommandSpecific && e.SC() == scInvalidFormat:
		what = ": Invalid Format"
	case e.SCT() == sctCommandSpecific && e.SC() == scInvalidLogPage:
		what = ": Invalid Log Page"
	case e.SCT() == sctMediaDataIntegrity && e.SC() == scAccessDenied:
		what = ": Access Denied"
	}
	return fmt.Sprintf("%s: NVMe status %#04x (type %d, code %#02x%s)", e.Command, e.Status, e.SCT(), e.SC(), what)
}
