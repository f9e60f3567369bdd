// Package lldp captures the first LLDP frame heard on each network interface
// and reports its TLVs exactly as Ironic Python Agent does: a list of
// [type, "lowercase hex value"] pairs in wire order. It also decodes those
// TLVs (chassis, port, system, VLANs, MTU, link aggregation) for people and
// logs.
//
// The TLV list is kept raw on purpose: Ironic, ironic-inspector and Metal3
// parse it themselves, so any interpretation here would only lose data.
package lldp

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/ironic-go/ironic-agent/inventory"
)

const (
	// EtherType is the Ethernet type of LLDP frames (IEEE 802.1AB).
	EtherType = 0x88cc

	// ethHeaderLen is destination MAC, source MAC and EtherType. IPA drops
	// exactly this many bytes and reports nothing for a shorter frame.
	ethHeaderLen = 14
	// vlanTagLen is one 802.1Q or 802.1ad tag (TPID + TCI).
	vlanTagLen = 4

	// TLV types of IEEE 802.1AB-2016, section 8.4.
	TypeEnd               = 0
	TypeChassisID         = 1
	TypePortID            = 2
	TypeTTL               = 3
	TypePortDescription   = 4
	TypeSystemName        = 5
	TypeSystemDescription = 6
	TypeCapabilities      = 7
	TypeManagementAddress = 8
	TypeOrgSpecific       = 127
)

// nearestBridge returns the destination group of LLDP frames
// (01:80:c2:00:00:0e), the one group every 802.1AB agent sends to. It is a
// function, not a variable, so no caller can change it.
func nearestBridge() []byte { return []byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e} }

// RawTLV is one TLV as it was on the wire.
type RawTLV struct {
	Type  int
	Value []byte
}

// ParseFrame returns the TLVs of one received Ethernet frame the way IPA
// reports them: every TLV in wire order, the End TLV and anything after it
// included (IPA does not stop there, so the zero padding of a short frame
// shows up as more [0, ""] entries), each value as lowercase hex. A frame
// shorter than an Ethernet header gives an empty list, never nil.
//
// A TLV whose length runs past the end of the frame keeps the bytes that are
// there, and a single trailing byte is ignored: IPA does the former and
// raises an exception on the latter, losing every interface's LLDP data.
//
// Unlike IPA, 802.1Q and 802.1ad tags left in the frame are skipped. A
// packet socket never sees them (the kernel strips the tag before it
// delivers a frame by EtherType), so this only matters for frames from other
// sources, where IPA would report the tag as garbage TLVs.
func ParseFrame(frame []byte) []inventory.LLDPTLV {
	raw := SplitFrame(frame)
	out := make([]inventory.LLDPTLV, 0, len(raw))
	for _, t := range raw {
		out = append(out, inventory.LLDPTLV{Type: t.Type, Value: hex.EncodeToString(t.Value)})
	}
	return out
}

// SplitFrame is ParseFrame without the hex encoding; the values share
// frame's memory.
func SplitFrame(frame []byte) []RawTLV {
	return SplitTLVs(Payload(frame))
}

// Payload returns the LLDPDU of an Ethernet frame: what follows the 14-byte
// header and any VLAN tags. It is nil for a frame shorter than the header.
func Payload(frame []byte) []byte {
	if len(frame) < ethHeaderLen {
		return nil
	}
	off := ethHeaderLen - 2 // the EtherType, or a tag protocol identifier
	for len(frame) >= off+2+vlanTagLen+2 && isVLANTPID(binary.BigEndian.Uint16(frame[off:])) {
		off += vlanTagLen
	}
	return frame[off+2:]
}

// isVLANTPID reports whether an EtherType announces a VLAN tag: 802.1Q,
// 802.1ad, and the pre-standard QinQ value some switches still send.
func isVLANTPID(t uint16) bool {
	return t == 0x8100 || t == 0x88a8 || t == 0x9100
}

// SplitTLVs splits an LLDPDU into TLVs: a 16-bit big-endian header with the
// type in the top 7 bits and the length in the low 9, then the value. It
// goes on until fewer than two bytes remain; see ParseFrame for the rules.
func SplitTLVs(b []byte) []RawTLV {
	out := []RawTLV{}
	for len(b) >= 2 {
		hdr := binary.BigEndian.Uint16(b)
		typ, n := int(hdr>>9), int(hdr&0x1ff)
		b = b[2:]
		n = min(n, len(b))
		out = append(out, RawTLV{Type: typ, Value: b[:n:n]})
		b = b[n:]
	}
	return out
}

// DecodeHex turns inventory TLVs back into raw bytes, for the decoder. A
// value that is not valid hex is reported with its position.
func DecodeHex(tlvs []inventory.LLDPTLV) ([]RawTLV, error) {
	out := make([]RawTLV, 0, len(tlvs))
	for i, t := range tlvs {
		v, err := hex.DecodeString(t.Value)
		if err != nil {
			return nil, &HexError{Index: i, Type: t.Type, Err: err}
		}
		out = append(out, RawTLV{Type: t.Type, Value: v})
	}
	return out, nil
}

// HexError says which TLV of an inventory list is not valid hex.
type HexError struct {
	Index int
	Type  int
	Err   error
}

func (e *HexError) Error() string {
	return fmt.Sprintf("lldp: TLV %d (type %d): value is not hex: %v", e.Index, e.Type, e.Err)
}

func (e *HexError) Unwrap() error { return e.Err }
