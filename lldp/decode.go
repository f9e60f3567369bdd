package lldp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"unicode/utf8"

	"github.com/ironic-go/ironic-agent/inventory"
)

// Organisationally unique identifiers of the TLV sets the decoder knows.
const (
	ouiIEEE8021 = 0x0080c2
	ouiIEEE8023 = 0x00120f
)

// Neighbor is what one LLDP frame says about the switch port at the other
// end of a cable. Fields the frame did not carry are zero; Problems lists
// the TLVs that could not be decoded, so a log shows why a field is missing.
type Neighbor struct {
	ChassisID           string           `json:"chassis_id,omitempty"`
	ChassisIDSubtype    string           `json:"chassis_id_subtype,omitempty"`
	PortID              string           `json:"port_id,omitempty"`
	PortIDSubtype       string           `json:"port_id_subtype,omitempty"`
	TTLSeconds          *int             `json:"ttl_seconds,omitempty"`
	PortDescription     string           `json:"port_description,omitempty"`
	SystemName          string           `json:"system_name,omitempty"`
	SystemDescription   string           `json:"system_description,omitempty"`
	Capabilities        []string         `json:"capabilities,omitempty"`
	EnabledCapabilities []string         `json:"enabled_capabilities,omitempty"`
	ManagementAddresses []string         `json:"management_addresses,omitempty"`
	PortVLANID          *int             `json:"port_vlan_id,omitempty"`
	VLANs               []VLAN           `json:"vlans,omitempty"`
	MTU                 *int             `json:"mtu,omitempty"` // 802.3 maximum frame size, bytes
	LinkAggregation     *LinkAggregation `json:"link_aggregation,omitempty"`
	// Unknown counts TLVs the decoder does not interpret (reserved types,
	// other organisations, other 802.1/802.3 subtypes). They are not
	// errors: they stay in the raw list for Ironic.
	Unknown  int      `json:"unknown_tlvs,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// VLAN is one 802.1 VLAN Name TLV.
type VLAN struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

// LinkAggregation is the 802.1AX (or older 802.3) link aggregation TLV.
type LinkAggregation struct {
	Supported bool   `json:"supported"`
	Enabled   bool   `json:"enabled"`
	PortID    uint32 `json:"port_id"`
}

// Decode interprets inventory TLVs ([type, hex] pairs). It fails only when a
// value is not hex; TLVs that are too short or malformed become Problems.
func Decode(tlvs []inventory.LLDPTLV) (Neighbor, error) {
	raw, err := DecodeHex(tlvs)
	if err != nil {
		return Neighbor{}, err
	}
	return DecodeRaw(raw), nil
}

// DecodeRaw interprets raw TLVs. When a TLV that should appear once appears
// again, the first one wins, as in Ironic's LLDP processing.
func DecodeRaw(tlvs []RawTLV) Neighbor {
	var n Neighbor
	seen := map[int]bool{}
	for i, t := range tlvs {
		if err := n.add(t, seen); err != nil {
			n.Problems = append(n.Problems, fmt.Sprintf("TLV %d (type %d): %v", i, t.Type, err))
		}
	}
	return n
}

func (n *Neighbor) add(t RawTLV, seen map[int]bool) error {
	v := t.Value
	once := func() bool {
		if seen[t.Type] {
			return false
		}
		seen[t.Type] = true
		return true
	}
	switch t.Type {
	case TypeEnd:
		return nil
	case TypeChassisID:
		if !once() {
			return nil
		}
		sub, id, err := decodeID(v, chassisSubtypes(), 4, 5)
		n.ChassisIDSubtype, n.ChassisID = sub, id
		return err
	case TypePortID:
		if !once() {
			return nil
		}
		sub, id, err := decodeID(v, portSubtypes(), 3, 4)
		n.PortIDSubtype, n.PortID = sub, id
		return err
	case TypeTTL:
		if len(v) < 2 {
			return fmt.Errorf("time to live: want 2 bytes, got %d", len(v))
		}
		if once() {
			ttl := int(binary.BigEndian.Uint16(v))
			n.TTLSeconds = &ttl
		}
	case TypePortDescription:
		if once() {
			n.PortDescription = text(v)
		}
	case TypeSystemName:
		if once() {
			n.SystemName = text(v)
		}
	case TypeSystemDescription:
		if once() {
			n.SystemDescription = text(v)
		}
	case TypeCapabilities:
		if len(v) < 4 {
			return fmt.Errorf("system capabilities: want 4 bytes, got %d", len(v))
		}
		if once() {
			n.Capabilities = capabilityNames(binary.BigEndian.Uint16(v))
			n.EnabledCapabilities = capabilityNames(binary.BigEndian.Uint16(v[2:]))
		}
	case TypeManagementAddress:
		addr, err := managementAddress(v)
		if err != nil {
			return err
		}
		n.ManagementAddresses = append(n.ManagementAddresses, addr)
	case TypeOrgSpecific:
		if len(v) < 4 {
			return fmt.Errorf("organisationally specific: want at least 4 bytes (OUI, subtype), got %d", len(v))
		}
		oui := uint32(v[0])<<16 | uint32(v[1])<<8 | uint32(v[2])
		return n.addOrg(oui, v[3], v[4:])
	default:
		n.Unknown++
	}
	return nil
}

func (n *Neighbor) addOrg(oui uint32, subtype byte, v []byte) error {
	switch {
	case oui == ouiIEEE8021 && subtype == 1: // Port VLAN ID
		if len(v) < 2 {
			return fmt.Errorf("802.1 port VLAN ID: want 2 bytes, got %d", len(v))
		}
		if n.PortVLANID == nil {
			pvid := int(binary.BigEndian.Uint16(v))
			n.PortVLANID = &pvid
		}
	case oui == ouiIEEE8021 && subtype == vlanNameSubtype:
		vlan, err := DecodeVLANName(v, false)
		if err != nil {
			return err
		}
		n.VLANs = append(n.VLANs, vlan)
	case oui == ouiIEEE8021 && subtype == 7, oui == ouiIEEE8023 && subtype == 3: // Link Aggregation
		if len(v) < 5 {
			return fmt.Errorf("link aggregation: want 5 bytes, got %d", len(v))
		}
		if n.LinkAggregation == nil {
			n.LinkAggregation = &LinkAggregation{
				Supported: v[0]&1 != 0,
				Enabled:   v[0]&2 != 0,
				PortID:    binary.BigEndian.Uint32(v[1:]),
			}
		}
	case oui == ouiIEEE8023 && subtype == 4: // Maximum Frame Size
		if len(v) < 2 {
			return fmt.Errorf("802.3 maximum frame size: want 2 bytes, got %d", len(v))
		}
		if n.MTU == nil {
			mtu := int(binary.BigEndian.Uint16(v))
			n.MTU = &mtu
		}
	default:
		n.Unknown++
	}
	return nil
}

// vlanNameSubtype is the 802.1 VLAN Name TLV's subtype (OUI 00-80-C2).
const vlanNameSubtype = 3

// VLANNameInfo returns the information of an 802.1 VLAN Name TLV (OUI
// 00-80-C2, subtype 3) from value, an organisationally specific TLV's
// value; ok is false for any other TLV.
func VLANNameInfo(value []byte) (info []byte, ok bool) {
	if len(value) < 4 || uint32(value[0])<<16|uint32(value[1])<<8|uint32(value[2]) != ouiIEEE8021 || value[3] != vlanNameSubtype {
		return nil, false
	}
	return value[4:], true
}

// DecodeVLANName decodes the information of an 802.1 VLAN Name TLV (see
// VLANNameInfo): the VLAN ID, the name's length, the name. Strict, it
// refuses information whose name is cut short, as Decode does. Lenient, it
// reads the TLV as IPA's _add_vlans_from_lldp does, which uses only the ID:
// the two ID bytes must be there, and the name is what follows of it, up to
// its length ("" when none does).
func DecodeVLANName(info []byte, lenient bool) (VLAN, error) {
	if lenient && len(info) == 2 {
		return VLAN{ID: int(binary.BigEndian.Uint16(info))}, nil
	}
	if len(info) < 3 {
		return VLAN{}, fmt.Errorf("802.1 VLAN name: want at least 3 bytes, got %d", len(info))
	}
	id, l := int(binary.BigEndian.Uint16(info)), int(info[2])
	if len(info) < 3+l {
		if !lenient {
			return VLAN{}, fmt.Errorf("802.1 VLAN name of VLAN %d: name length %d, but %d bytes follow", id, l, len(info)-3)
		}
		l = len(info) - 3
	}
	return VLAN{ID: id, Name: text(info[3 : 3+l])}, nil
}

// chassisSubtypes names the chassis ID subtypes, 802.1AB-2016 table 8-2.
func chassisSubtypes() []string {
	return []string{1: "chassis component", 2: "interface alias", 3: "port component",
		4: "mac address", 5: "network address", 6: "interface name", 7: "local"}
}

// portSubtypes names the port ID subtypes, 802.1AB-2016 table 8-3.
func portSubtypes() []string {
	return []string{1: "interface alias", 2: "port component", 3: "mac address",
		4: "network address", 5: "interface name", 6: "agent circuit id", 7: "local"}
}

// decodeID decodes a chassis or port ID: a subtype byte, then a MAC, a
// network address or text depending on the subtype.
func decodeID(v []byte, names []string, macSubtype, netSubtype byte) (string, string, error) {
	if len(v) < 2 {
		return "", "", fmt.Errorf("ID: want a subtype and at least one byte, got %d bytes", len(v))
	}
	sub, id := v[0], v[1:]
	name := fmt.Sprintf("subtype %d", sub)
	if int(sub) < len(names) && names[sub] != "" {
		name = names[sub]
	}
	switch sub {
	case macSubtype:
		if len(id) != 6 {
			return name, "", fmt.Errorf("MAC address ID: want 6 bytes, got %d", len(id))
		}
		return name, net.HardwareAddr(id).String(), nil
	case netSubtype:
		a, err := networkAddress(id)
		return name, a, err
	}
	return name, text(id), nil
}

// networkAddress decodes an IANA address family byte and an address.
func networkAddress(v []byte) (string, error) {
	if len(v) < 1 {
		return "", fmt.Errorf("network address: empty")
	}
	fam, a := v[0], v[1:]
	switch fam {
	case 1:
		if len(a) == 4 {
			return netip.AddrFrom4([4]byte(a)).String(), nil
		}
	case 2:
		if len(a) == 16 {
			return netip.AddrFrom16([16]byte(a)).String(), nil
		}
	case 6: // IEEE 802 MAC
		if len(a) == 6 {
			return net.HardwareAddr(a).String(), nil
		}
	default:
		return fmt.Sprintf("family %d: %x", fam, a), nil
	}
	return "", fmt.Errorf("network address of family %d: %d bytes do not make an address", fam, len(a))
}

// managementAddress decodes the address of a Management Address TLV: its
// length byte counts the family byte and the address.
func managementAddress(v []byte) (string, error) {
	if len(v) < 2 {
		return "", fmt.Errorf("management address: want at least 2 bytes, got %d", len(v))
	}
	l := int(v[0])
	if l < 2 || len(v) < 1+l {
		return "", fmt.Errorf("management address: address length %d, but %d bytes follow", l, len(v)-1)
	}
	return networkAddress(v[1 : 1+l])
}

// capabilityNames lists the capability bits of 802.1AB-2016 table 8-4.
func capabilityNames(bits uint16) []string {
	names := [...]string{"Other", "Repeater", "Bridge", "WLAN AP", "Router", "Telephone",
		"DOCSIS cable device", "Station only", "C-VLAN component", "S-VLAN component", "Two-port MAC relay"}
	var out []string
	for i, name := range names {
		if bits&(1<<i) != 0 {
			out = append(out, name)
		}
	}
	return out
}

// text turns a TLV string into printable text: switches send UTF-8, but a
// NUL terminator or a stray control byte must not reach a terminal or log.
func text(b []byte) string {
	s := strings.TrimRight(string(b), "\x00")
	if utf8.ValidString(s) && !strings.ContainsFunc(s, isControl) {
		return s
	}
	var sb strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if isControl(r) {
			fmt.Fprintf(&sb, "\\x%02x", r)
			continue
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

func isControl(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }
