// Package efivar reads and writes UEFI boot entries through Linux's
// efivarfs, the way efibootmgr (libefivar, libefiboot) does, with no
// external program: EFI_LOAD_OPTION encoding (UEFI 2.10 section 3.1.3),
// the device path nodes a disk boot entry needs (section 10.3), the
// Boot#### and BootOrder variables, and efivarfs's immutable flag.
package efivar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
)

// LoadOptionActive is the EFI_LOAD_OPTION attribute that makes the firmware
// consider the entry (LOAD_OPTION_ACTIVE); efibootmgr -c sets only it.
const LoadOptionActive = 0x00000001

// LoadOption is an EFI_LOAD_OPTION, the value of a Boot#### variable.
type LoadOption struct {
	Attributes   uint32
	Description  string
	FilePath     DevicePath
	OptionalData []byte
}

// MarshalBinary encodes o: UINT32 Attributes, UINT16 FilePathListLength,
// the description as NUL-terminated UTF-16LE, the device path, then the
// optional data.
func (o LoadOption) MarshalBinary() ([]byte, error) {
	fp := o.FilePath.bytes()
	if len(fp) > 0xffff {
		return nil, fmt.Errorf("efivar: device path of %d bytes does not fit a load option", len(fp))
	}
	if strings.ContainsRune(o.Description, 0) {
		return nil, errors.New("efivar: the description holds a NUL character")
	}
	b := binary.LittleEndian.AppendUint32(nil, o.Attributes)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(fp)))
	b = appendUTF16Z(b, o.Description)
	b = append(b, fp...)
	return append(b, o.OptionalData...), nil
}

// ParseLoadOption decodes the value of a Boot#### variable (without the
// four attribute bytes efivarfs puts in front).
func ParseLoadOption(b []byte) (*LoadOption, error) {
	if len(b) < 6 {
		return nil, fmt.Errorf("efivar: load option of %d bytes, want at least 6", len(b))
	}
	o := &LoadOption{Attributes: binary.LittleEndian.Uint32(b)}
	fpLen := int(binary.LittleEndian.Uint16(b[4:]))
	desc, n, err := readUTF16Z(b[6:])
	if err != nil {
		return nil, fmt.Errorf("efivar: load option description: %w", err)
	}
	o.Description = desc
	rest := b[6+n:]
	if fpLen > len(rest) {
		return nil, fmt.Errorf("efivar: load option says its device path has %d bytes, only %d follow the description", fpLen, len(rest))
	}
	if o.FilePath, err = ParseDevicePath(rest[:fpLen]); err != nil {
		return nil, err
	}
	if len(rest) > fpLen {
		o.OptionalData = append([]byte(nil), rest[fpLen:]...)
	}
	return o, nil
}

func appendUTF16Z(b []byte, s string) []byte {
	for _, u := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, u)
	}
	return append(b, 0, 0)
}

// readUTF16Z decodes NUL-terminated UTF-16LE and returns the bytes used,
// terminator included.
func readUTF16Z(b []byte) (string, int, error) {
	var u []uint16
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			return string(utf16.Decode(u)), i + 2, nil
		}
		u = append(u, c)
	}
	return "", 0, errors.New("no NUL-terminated UTF-16 string")
}

// Device path node types and subtypes (UEFI 2.10 section 10.3.1).
const (
	typeMedia          = 0x04
	subtypeHardDrive   = 0x01
	subtypeFilePath    = 0x04
	typeEnd            = 0x7f
	subtypeEndEntire   = 0xff
	subtypeEndInstance = 0x01
)

// DevicePathNode is one EFI_DEVICE_PATH_PROTOCOL node: its type, subtype
// and the bytes after the four-byte header.
type DevicePathNode struct {
	Type, SubType uint8
	Data          []byte
}

// DevicePath is a device path up to, not including, its end node.
type DevicePath []DevicePathNode

func (p DevicePath) bytes() []byte {
	var b []byte
	for _, n := range p {
		b = append(b, n.Type, n.SubType)
		b = binary.LittleEndian.AppendUint16(b, uint16(4+len(n.Data)))
		b = append(b, n.Data...)
	}
	return append(b, typeEnd, subtypeEndEntire, 4, 0)
}

// ParseDevicePath decodes a device path list up to its end-of-entire-path
// node; bytes after it are an error, as is a path without one.
func ParseDevicePath(b []byte) (DevicePath, error) {
	var p DevicePath
	for off := 0; ; {
		if len(b)-off < 4 {
			return nil, fmt.Errorf("efivar: device path: no end node (%d bytes left at offset %d)", len(b)-off, off)
		}
		typ, sub := b[off], b[off+1]
		l := int(binary.LittleEndian.Uint16(b[off+2:]))
		if l < 4 || l > len(b)-off {
			return nil, fmt.Errorf("efivar: device path: node at offset %d has length %d (%d bytes left)", off, l, len(b)-off)
		}
		if typ == typeEnd && sub == subtypeEndEntire {
			if off+l != len(b) {
				return nil, fmt.Errorf("efivar: device path: %d bytes after the end node", len(b)-off-l)
			}
			return p, nil
		}
		p = append(p, DevicePathNode{Type: typ, SubType: sub, Data: append([]byte(nil), b[off+4:off+l]...)})
		off += l
	}
}

// Partition table formats of a hard drive node (MBRType) and the kinds of
// signature it carries (SignatureType).
const (
	PartitionMBR  = 0x01
	PartitionGPT  = 0x02
	SignatureMBR  = 0x01
	SignatureGUID = 0x02
)

// HardDrive is a hard drive media device path node: a partition found by
// its signature wherever the disk is attached, the short form efibootmgr
// writes by default and firmware expands.
type HardDrive struct {
	PartitionNumber uint32
	Start, Size     uint64 // in logical blocks of the disk
	// Signature is the GPT partition's unique GUID as stored on disk, or
	// the MBR disk signature in its first four bytes.
	Signature     [16]byte
	MBRType       uint8
	SignatureType uint8
}

// Node encodes h (42 bytes with the header).
func (h HardDrive) Node() DevicePathNode {
	d := binary.LittleEndian.AppendUint32(nil, h.PartitionNumber)
	d = binary.LittleEndian.AppendUint64(d, h.Start)
	d = binary.LittleEndian.AppendUint64(d, h.Size)
	d = append(d, h.Signature[:]...)
	d = append(d, h.MBRType, h.SignatureType)
	return DevicePathNode{Type: typeMedia, SubType: subtypeHardDrive, Data: d}
}

// HardDrive decodes n if it is a hard drive node.
func (n DevicePathNode) HardDrive() (HardDrive, bool) {
	if n.Type != typeMedia || n.SubType != subtypeHardDrive || len(n.Data) != 38 {
		return HardDrive{}, false
	}
	h := HardDrive{
		PartitionNumber: binary.LittleEndian.Uint32(n.Data),
		Start:           binary.LittleEndian.Uint64(n.Data[4:]),
		Size:            binary.LittleEndian.Uint64(n.Data[12:]),
		MBRType:         n.Data[36],
		SignatureType:   n.Data[37],
	}
	copy(h.Signature[:], n.Data[20:36])
	return h, true
}

// FilePathNode is a file path media node: a path on the partition, with
// backslashes (\EFI\BOOT\BOOTX64.EFI).
func FilePathNode(path string) DevicePathNode {
	return DevicePathNode{Type: typeMedia, SubType: subtypeFilePath, Data: appendUTF16Z(nil, path)}
}

// FilePath decodes n if it is a file path node.
func (n DevicePathNode) FilePath() (string, bool) {
	if n.Type != typeMedia || n.SubType != subtypeFilePath {
		return "", false
	}
	s, used, err := readUTF16Z(n.Data)
	if err != nil || used != len(n.Data) {
		return "", false
	}
	return s, true
}

// GUIDString renders a GUID stored in the mixed-endian EFI_GUID layout.
func GUIDString(g [16]byte) string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", binary.LittleEndian.Uint32(g[0:]), binary.LittleEndian.Uint16(g[4:]),
		binary.LittleEndian.Uint16(g[6:]), g[8:10], g[10:16])
}

// String renders the node in the text form of UEFI 2.10 section 10.6 that
// efibootmgr -v prints (HD(1,GPT,<guid>,0x800,0x1000), File(\EFI\...));
// other nodes in the generic Path(type,subtype,hex) form.
func (n DevicePathNode) String() string {
	if h, ok := n.HardDrive(); ok {
		switch {
		case h.MBRType == PartitionGPT && h.SignatureType == SignatureGUID:
			return fmt.Sprintf("HD(%d,GPT,%s,0x%x,0x%x)", h.PartitionNumber, GUIDString(h.Signature), h.Start, h.Size)
		case h.MBRType == PartitionMBR && h.SignatureType == SignatureMBR:
			return fmt.Sprintf("HD(%d,MBR,0x%x,0x%x,0x%x)", h.PartitionNumber, binary.LittleEndian.Uint32(h.Signature[:]), h.Start, h.Size)
		}
	}
	if p, ok := n.FilePath(); ok {
		return "File(" + p + ")"
	}
	if n.Type == typeEnd && n.SubType == subtypeEndInstance {
		return ","
	}
	return fmt.Sprintf("Path(%d,%d,%x)", n.Type, n.SubType, n.Data)
}

// String renders the path as its nodes joined by "/".
func (p DevicePath) String() string {
	var b strings.Builder
	for i, n := range p {
		s := n.String()
		if i > 0 && s != "," && p[i-1].String() != "," {
			b.WriteByte('/')
		}
		b.WriteString(s)
	}
	return b.String()
}
