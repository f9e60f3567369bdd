package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
)

// netRecordPath holds, in a fixture tree, what netlink and ethtool said on
// the recorded machine: sysfs has no IP addresses, no permanent MAC and no
// supported link modes, and a copy of sys/class/net does not keep the
// kernel's directory order, so capture-fixture writes them here and the
// collector reads them back for any root other than "/".
const netRecordPath = "run/ironic-agent-capture/net.json"

// netRecord is the content of netRecordPath.
type netRecord struct {
	// Interfaces maps an interface name to its facts.
	Interfaces map[string]netFacts `json:"interfaces"`
	// Order is IPA's candidate interfaces in the order the kernel listed
	// sys/class/net, the inventory's order. Captures before it was
	// recorded have none: their interfaces are listed by name.
	Order []string `json:"order,omitempty"`
}

// netFacts is what the kernel said about one interface over netlink.
type netFacts struct {
	// PermAddress is IFLA_PERM_ADDRESS (the burnt-in MAC); "" when the
	// driver reports none (virtio, most virtual NICs).
	PermAddress string `json:"perm_address,omitempty"`
	// IPv4 and IPv6 are the addresses in the kernel's dump order, without
	// prefix length; IPv6 link-local addresses carry "%<ifname>", as the
	// getifaddrs-based netifaces IPA uses prints them.
	IPv4 []string `json:"ipv4"`
	IPv6 []string `json:"ipv6"`
	// LinkModes are the ethtool link modes the NIC supports
	// ("10000baseT/Full", ...), of ETHTOOL_GSET's 32-bit mask;
	// speed_mbps is the fastest of those lshw knows, lshw's capacity.
	LinkModes []string `json:"link_modes,omitempty"`
	// SpeedMbps is the current link speed; nil when unknown (no link,
	// virtio). speed_mbps falls back to it when no supported mode gives
	// a capacity.
	SpeedMbps *int `json:"speed_mbps,omitempty"`
}

// netFactsFor returns the facts for the named interfaces: from netlink and
// ethtool on a live root, from netRecordPath below any other root. A
// fixture without the file gives no facts (addresses and speed null, MAC
// from sysfs).
func (c *collection) netFactsFor(ctx context.Context, names []string) (*netRecord, error) {
	if c.net != nil {
		return c.net, nil
	}
	if c.fs.live() {
		rec, err := liveNetRecord(ctx, names)
		if rec != nil {
			c.net = rec
		}
		return rec, err
	}
	b, err := c.fs.ReadFile(netRecordPath)
	if errors.Is(err, fs.ErrNotExist) {
		c.net = &netRecord{Interfaces: map[string]netFacts{}}
		return c.net, nil
	}
	if err != nil {
		return nil, err
	}
	rec, err := parseNetRecord(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.fs.Path(netRecordPath), err)
	}
	c.net = rec
	return c.net, nil
}

// parseNetRecord decodes a recorded net.json.
func parseNetRecord(b []byte) (*netRecord, error) {
	var rec netRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, err
	}
	if rec.Interfaces == nil {
		rec.Interfaces = map[string]netFacts{}
	}
	return &rec, nil
}

// legacyLinkModes names the link modes of ETHTOOL_GSET's 32-bit supported
// mask, bit by bit, as the kernel's ethtool strings do.
var legacyLinkModes = [32]string{
	"10baseT/Half", "10baseT/Full", "100baseT/Half", "100baseT/Full",
	"1000baseT/Half", "1000baseT/Full", "Autoneg", "TP",
	"AUI", "MII", "FIBRE", "BNC",
	"10000baseT/Full", "Pause", "Asym_Pause", "2500baseX/Full",
	"Backplane", "1000baseKX/Full", "10000baseKX4/Full", "10000baseKR/Full",
	"10000baseR_FEC", "20000baseMLD2/Full", "20000baseKR2/Full", "40000baseKR4/Full",
	"40000baseCR4/Full", "40000baseSR4/Full", "40000baseLR4/Full", "56000baseKR4/Full",
	"56000baseCR4/Full", "56000baseSR4/Full", "56000baseLR4/Full", "25000baseCR/Full",
}
