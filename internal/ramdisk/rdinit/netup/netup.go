// Package netup is the network set-up of the ramdisk's PID 1 (package
// rdinit): it brings the NICs up and configures them by DHCPv4 and by IPv6
// router advertisements (SLAAC, DHCPv6), makes the VLAN links
// ipa-enable-vlan-interfaces asks for (named, or learned from LLDP), or
// applies a config drive's network_data.json (static addresses, bonds,
// VLANs) as glean does for IPA's images. It writes resolv.conf and the
// host name a lease gives, and keeps every lease renewed for the life of
// the machine.
//
// PID 1 parses a Config from the kernel command line, reads the config
// drive's network data with LoadNetworkData, and calls New(...).Up, which
// returns once the first address is configured.
package netup

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// The init's parameters that name the NICs to configure, and Ironic's that
// names the config drive to take; rdinit parses them, and the log lines
// here name them.
const (
	ParamDHCP = "ironic_agent.dhcp" // all (default) | none | MAC[,MAC]; with network data: the NICs it does not name (default none)
	// ParamPublisherID is Ironic's: the publisher ID of the virtual-media
	// ISO it built, whose config drive is the only one to take.
	ParamPublisherID = "ir_pub_id"
)

// Config is the network part of the init's configuration, from the kernel
// command line.
type Config struct {
	DHCP []string // nil: all NICs; empty non-nil: none; else MACs
	// DHCPGiven is set when ironic_agent.dhcp is on the command line:
	// with network data, only then do the NICs the document does not
	// name get DHCP (glean's fallback, see applyNetworkData).
	DHCPGiven   bool
	DHCPTimeout time.Duration
	// DHCPRetry is the pause between the background attempts on a link
	// whose first DHCPTimeout passed without a lease (0: no more tries).
	DHCPRetry time.Duration
	Debug     bool   // log DHCP exchanges
	BootIF    string // MAC from BOOTIF, "" if absent
	// IPv6 configures the NICs from router advertisements too (SLAAC,
	// DHCPv6) alongside DHCPv4.
	IPv6 bool

	// VLANs are ipa-enable-vlan-interfaces's good entries, VLANProblems
	// its bad ones (logged; the others still apply). The entries that
	// learn VLANs from LLDP act only with CollectLLDP, as in IPA, and
	// listen for LLDPTimeout at most.
	VLANs        []VLANRequest
	VLANProblems []error
	CollectLLDP  bool
	LLDPTimeout  time.Duration

	// Files written outside the agent's state directory. The ramdisk's
	// are rdinit's defaults; a test points them into a temporary
	// directory (a network namespace does not isolate files, so a DHCP
	// client run in one would otherwise rewrite the host's). An empty
	// path is never written.
	ResolvConf   string // DNS servers and search domains from the first lease
	HostnameFile string // host name from a lease (option 12)
	IPv6Conf     string // /proc/sys/net/ipv6/conf: per-link accept_ra, autoconf, disable_ipv6
}

// NormalizeMAC returns the Ethernet MAC address s in lower case with
// colons, or an error naming s.
func NormalizeMAC(s string) (string, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		// ParseMAC also takes 8- and 20-byte addresses (EUI-64,
		// InfiniBand), which are no NIC's MAC here.
		return "", fmt.Errorf("%q is not a MAC address", s)
	}
	return hw.String(), nil
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
