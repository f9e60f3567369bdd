package netup

import (
	"fmt"
	"strconv"
	"strings"
)

// IPA's parameters the init reads for tagged provisioning networks. The
// agent parses them too (agent/config); the init acts on them because it
// owns the ramdisk's network: the VLAN links must exist and hold a lease
// before the agent looks the node up over them.
const (
	ParamVLANs       = "ipa-enable-vlan-interfaces" // IFACE.VLAN | MAC.VLAN | IFACE | all, comma-separated
	ParamCollectLLDP = "ipa-collect-lldp"           // IFACE and all learn VLANs from LLDP only when set, as in IPA
	ParamLLDPTimeout = "ipa-lldp-timeout"           // seconds to listen for LLDP (IPA's default 30)
	minVLANID        = 1
	maxVLANID        = 4094
	// maxLinkName is IFNAMSIZ less the NUL: a longer VLAN link name (a
	// long parent name plus ".4094") cannot be created.
	maxLinkName = 15
)

// VLANRequest is one entry of ipa-enable-vlan-interfaces.
type VLANRequest struct {
	Entry string // as written, for logs
	// All: every NIC, with the VLANs its LLDP neighbour announces.
	All bool
	// Parent is an interface name, or a MAC address (lower case) when
	// MAC is set; empty with All.
	Parent string
	MAC    bool
	// ID is the VLAN to create; 0 means the VLANs the parent's LLDP
	// neighbour announces.
	ID int
}

// FromLLDP reports whether the request's VLANs come from LLDP.
func (r VLANRequest) FromLLDP() bool { return r.ID == 0 }

// ParseVLANs reads ipa-enable-vlan-interfaces as IPA's
// bring_up_vlan_interfaces does: comma-separated entries, blanks dropped;
// "all"; "PARENT.ID" where PARENT is an interface name or a MAC address;
// or a bare interface name. Entries that cannot be right (an ID that is not
// a number from 1 to 4094, an empty or impossible interface name) come
// back as errors naming the entry, and the other entries still apply: IPA
// logs a bad entry and goes on, and one typo must not cost the ramdisk its
// network.
func ParseVLANs(s string) ([]VLANRequest, []error) {
	var out []VLANRequest
	var errs []error
	for _, e := range splitList(s) {
		r, err := parseVLANEntry(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s entry %q: %w", ParamVLANs, e, err))
			continue
		}
		out = append(out, r)
	}
	return out, errs
}

func parseVLANEntry(e string) (VLANRequest, error) {
	r := VLANRequest{Entry: e}
	if e == "all" {
		r.All = true
		return r, nil
	}
	parent, id, dotted := strings.Cut(e, ".")
	if dotted {
		if id == "" || strings.Trim(id, "0123456789") != "" {
			return r, fmt.Errorf("VLAN ID %q is not a number", id)
		}
		n, err := strconv.Atoi(id)
		if err != nil || n < minVLANID || n > maxVLANID {
			return r, fmt.Errorf("VLAN ID %s is not from %d to %d", id, minVLANID, maxVLANID)
		}
		r.ID = n
	}
	if mac, err := NormalizeMAC(parent); err == nil {
		if !dotted {
			// IPA looks a bare entry up by name only.
			return r, fmt.Errorf("a MAC address needs a VLAN ID (MAC.ID)")
		}
		r.Parent, r.MAC = mac, true
		return r, nil
	}
	if err := checkLinkName(parent); err != nil {
		return r, err
	}
	r.Parent = parent
	return r, nil
}

// checkLinkName refuses what the kernel refuses as a network interface
// name (dev_valid_name), so such an entry is reported as written.
func checkLinkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("no interface name")
	case len(name) > maxLinkName:
		return fmt.Errorf("interface name %q is longer than %d bytes", name, maxLinkName)
	case name == "." || name == "..":
		return fmt.Errorf("%q is not an interface name", name)
	case strings.ContainsFunc(name, func(r rune) bool { return r == '/' || r == ':' || r <= ' ' || r == 0x7f }):
		return fmt.Errorf("interface name %q has a character interface names cannot have", name)
	}
	return nil
}

// vlanLinkName is IPA's name for VLAN id on parent, the one the inventory
// recognises as a VLAN (`<name>.<digits>`).
func vlanLinkName(parent string, id int) (string, error) {
	name := parent + "." + strconv.Itoa(id)
	if len(name) > maxLinkName {
		return "", fmt.Errorf("VLAN interface name %q is longer than %d bytes", name, maxLinkName)
	}
	return name, nil
}
