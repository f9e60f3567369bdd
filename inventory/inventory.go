// Package inventory is the IPA-format hardware inventory: the document
// ironic-inspector, Ironic and Metal3 read. It holds plain data, its JSON
// encoding and pure helpers over it; it imports nothing else of this module.
// Root-device hints over its disks live in package inventory/hints.
//
// Field names, order, and the null-versus-empty rules follow Ironic Python
// Agent (master) exactly: a pointer field is JSON null when unknown, while
// system_vendor and cpu strings are "" when unknown.
package inventory

import (
	"encoding/json"
	"fmt"
)

// Inventory is the top-level document returned by get_hardware_info and
// posted under "inventory" to ironic-inspector.
type Inventory struct {
	Interfaces   []Interface  `json:"interfaces"`
	CPU          CPU          `json:"cpu"`
	Disks        []Disk       `json:"disks"`
	Memory       Memory       `json:"memory"`
	BMCAddress   *string      `json:"bmc_address"`
	BMCV6Address *string      `json:"bmc_v6address"`
	SystemVendor SystemVendor `json:"system_vendor"`
	Boot         Boot         `json:"boot"`
	Hostname     string       `json:"hostname"`
	// BMCMAC is omitted entirely when no BMC MAC was found, as IPA does.
	BMCMAC *string `json:"bmc_mac,omitempty"`
}

// Interface is one network interface (IPA's NetworkInterface).
type Interface struct {
	Name        string  `json:"name"`
	MACAddress  string  `json:"mac_address"`
	IPv4Address *string `json:"ipv4_address"`
	IPv6Address *string `json:"ipv6_address"`
	HasCarrier  bool    `json:"has_carrier"`
	// LLDP is null when LLDP was not collected and [] when it was collected
	// but nothing was heard.
	LLDP        []LLDPTLV `json:"lldp"`
	Vendor      *string   `json:"vendor"`
	Product     *string   `json:"product"`
	ClientID    *string   `json:"client_id"`
	BIOSDevName *string   `json:"biosdevname"`
	SpeedMbps   *int      `json:"speed_mbps"`
	PCIAddress  *string   `json:"pci_address"`
	Driver      *string   `json:"driver"`
}

// LLDPTLV is one raw TLV as IPA reports it: [type, "lowercase hex value"].
type LLDPTLV struct {
	Type  int
	Value string // lowercase hex of the TLV value bytes
}

// MarshalJSON encodes the TLV as a two-element JSON array.
func (t LLDPTLV) MarshalJSON() ([]byte, error) {
	return json.Marshal([2]any{t.Type, t.Value})
}

// UnmarshalJSON decodes a two-element [int, string] JSON array.
func (t *LLDPTLV) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("lldp tlv: %w", err)
	}
	if len(raw) != 2 {
		return fmt.Errorf("lldp tlv: want [type, value], got %d elements", len(raw))
	}
	if err := json.Unmarshal(raw[0], &t.Type); err != nil {
		return fmt.Errorf("lldp tlv type: %w", err)
	}
	if err := json.Unmarshal(raw[1], &t.Value); err != nil {
		return fmt.Errorf("lldp tlv value: %w", err)
	}
	return nil
}

// CPU describes the processors (IPA's CPU, from lscpu in IPA).
type CPU struct {
	ModelName    string   `json:"model_name"`
	Frequency    string   `json:"frequency"` // MHz as text, e.g. "2100.0000"; "" when unknown
	Count        int      `json:"count"`     // logical CPUs
	Architecture string   `json:"architecture"`
	Flags        []string `json:"flags"`
	SocketCount  int      `json:"socket_count"`
}

// Disk is one block device (IPA's BlockDevice).
type Disk struct {
	Name               string  `json:"name"` // /dev/<kname>
	Model              *string `json:"model"`
	Size               int64   `json:"size"` // bytes
	Rotational         bool    `json:"rotational"`
	WWN                *string `json:"wwn"`
	Serial             *string `json:"serial"`
	Vendor             *string `json:"vendor"`
	WWNWithExtension   *string `json:"wwn_with_extension"`
	WWNVendorExtension *string `json:"wwn_vendor_extension"`
	HCTL               *string `json:"hctl"`
	ByPath             *string `json:"by_path"`
	LogicalSectors     *int    `json:"logical_sectors"`
	PhysicalSectors    *int    `json:"physical_sectors"`
	Tran               *string `json:"tran"`
}

// Memory is the RAM summary.
type Memory struct {
	Total      *int64 `json:"total"`       // bytes usable by the kernel (MemTotal)
	PhysicalMB *int64 `json:"physical_mb"` // MiB installed, from SMBIOS memory devices
}

// SystemVendor is the SMBIOS system identity. Unknown strings are "".
type SystemVendor struct {
	ProductName  string   `json:"product_name"`
	SerialNumber string   `json:"serial_number"`
	Manufacturer string   `json:"manufacturer"`
	Firmware     Firmware `json:"firmware"`
}

// Firmware is the SMBIOS BIOS information. Unknown strings are "".
type Firmware struct {
	Vendor    string `json:"vendor"`
	Version   string `json:"version"`
	BuildDate string `json:"build_date"`
}

// Boot tells how the machine booted.
type Boot struct {
	CurrentBootMode string  `json:"current_boot_mode"` // "uefi" or "bios"
	PXEInterface    *string `json:"pxe_interface"`     // raw BOOTIF value
}

// Ptr returns a pointer to a copy of v; handy for optional fields.
func Ptr[T any](v T) *T { return &v }

// StrOrNil returns nil for "" and a pointer to s otherwise.
func StrOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// MACs returns the MAC addresses of all interfaces that have one, in
// inventory order: the addresses IPA sends to lookup.
func (inv *Inventory) MACs() []string {
	var out []string
	for _, i := range inv.Interfaces {
		if i.MACAddress != "" {
			out = append(out, i.MACAddress)
		}
	}
	return out
}

// MultipathPath is a SCSI disk that multipath-tools would take as a path
// of a multipath map: what assembling the maps needs to know of it. It is
// not part of IPA's inventory JSON: collector reads it and deploy/multipath
// makes the maps from it.
type MultipathPath struct {
	Name         string // kernel name, "sda"
	Major, Minor uint64
	Sectors      int64 // size in 512-byte sectors
	// WWID is the LUN's identifier as multipath-tools reads it: udev's
	// ID_SERIAL (its uid_attribute for SCSI), scsi_id's output, such as
	// "35000c500a1b2c3d4" for an NAA designator.
	WWID string
	// Held: something already holds the disk (a multipath map, an md
	// array, LVM); a new map cannot claim it.
	Held bool
	// Map is the name of the multipath map (a device-mapper device whose
	// DM UUID is "mpath-...") holding the disk, "" if none does.
	Map string
}
