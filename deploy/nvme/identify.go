package nvme

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Identify CNS values.
const (
	CNSNamespace  = 0x00
	CNSController = 0x01
)

// IdentifySize is the size of every Identify data structure.
const IdentifySize = 4096

// IdentifyCommand reads the Identify data structure cns (of namespace
// nsid for CNSNamespace) into a 4096-byte buffer.
func IdentifyCommand(cns uint8, nsid uint32) Command {
	return Command{Opcode: OpIdentify, NSID: nsid, DataLen: IdentifySize, CDW10: uint32(cns)}
}

// Controller is the part of the Identify Controller data structure the
// erase steps read.
type Controller struct {
	VendorID     uint16
	SerialNumber string // SN, trailing spaces trimmed
	ModelNumber  string // MN, trailing spaces trimmed
	Firmware     string // FR, trailing spaces trimmed
	// OACS is Optional Admin Command Support (bytes 257:256).
	OACS uint16
	// SANICAP is Sanitize Capabilities (bytes 331:328).
	SANICAP uint32
	// NN is the number of namespaces (bytes 519:516).
	NN uint32
	// FNA is Format NVM Attributes (byte 524).
	FNA uint8
}

// OACS, FNA and SANICAP bits.
const (
	OACSSecuritySend = 1 << 0
	OACSFormatNVM    = 1 << 1

	FNAFormatAllNamespaces = 1 << 0 // a format applies to every namespace
	FNAEraseAllNamespaces  = 1 << 1 // a secure erase applies to every namespace
	FNACryptoErase         = 1 << 2 // cryptographic erase supported

	SANICAPCryptoErase = 1 << 0
	SANICAPBlockErase  = 1 << 1
	SANICAPOverwrite   = 1 << 2
)

// ParseController reads an Identify Controller data structure.
func ParseController(b []byte) (Controller, error) {
	if len(b) != IdentifySize {
		return Controller{}, fmt.Errorf("nvme: Identify Controller data is %d bytes, not %d", len(b), IdentifySize)
	}
	le := binary.LittleEndian
	return Controller{
		VendorID:     le.Uint16(b[0:]),
		SerialNumber: ascii(b[4:24]),
		ModelNumber:  ascii(b[24:64]),
		Firmware:     ascii(b[64:72]),
		OACS:         le.Uint16(b[256:]),
		SANICAP:      le.Uint32(b[328:]),
		NN:           le.Uint32(b[516:]),
		FNA:          b[524],
	}, nil
}

// ascii is a space-padded ASCII field without its padding (and without
// any NUL a controller pads with instead).
func ascii(b []byte) string {
	return strings.TrimRight(string(b), " \x00")
}

// Namespace is the part of the Identify Namespace data structure a
// format needs to keep the namespace's current LBA format.
type Namespace struct {
	// Size is NSZE in logical blocks.
	Size uint64
	// NLBAF is the number of LBA formats, 0-based (byte 25).
	NLBAF uint8
	// FLBAS is Formatted LBA Size (byte 26): bits 3:0 the format index's
	// low bits, bit 4 metadata at the end of each block (extended LBA),
	// bits 6:5 the index's high bits when more than 16 formats exist.
	FLBAS uint8
	// DPS is End-to-end Data Protection Type Settings (byte 29): bits 2:0
	// the protection information type, bit 3 its location.
	DPS uint8
	// BlockSize is the current format's data size in bytes (2^LBADS),
	// 0 when the descriptor is unusable.
	BlockSize uint32
}

// LBAFormat is the index of the namespace's current LBA format.
func (n Namespace) LBAFormat() uint8 {
	idx := n.FLBAS & 0x0f
	if n.NLBAF >= 16 {
		idx |= (n.FLBAS >> 5 & 3) << 4
	}
	return idx
}

// ParseNamespace reads an Identify Namespace data structure. A namespace
// whose current format index is beyond the formats it lists is an error:
// formatting with it could only fail or pick a format nobody chose.
func ParseNamespace(b []byte) (Namespace, error) {
	if len(b) != IdentifySize {
		return Namespace{}, fmt.Errorf("nvme: Identify Namespace data is %d bytes, not %d", len(b), IdentifySize)
	}
	n := Namespace{Size: binary.LittleEndian.Uint64(b[0:]), NLBAF: b[25], FLBAS: b[26], DPS: b[29]}
	if n.Size == 0 {
		return n, fmt.Errorf("nvme: Identify Namespace reports no namespace (NSZE 0: inactive namespace ID)")
	}
	lbaf := n.LBAFormat()
	// 64 descriptors of 4 bytes from byte 128.
	if lbaf > n.NLBAF || lbaf >= 64 {
		return n, fmt.Errorf("nvme: current LBA format %d is beyond the %d the namespace lists", lbaf, int(n.NLBAF)+1)
	}
	if lbads := b[128+4*int(lbaf)+2]; lbads >= 9 && lbads < 32 {
		n.BlockSize = 1 << lbads
	}
	return n, nil
}
