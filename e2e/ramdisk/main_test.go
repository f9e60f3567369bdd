// Package ramdisk_test boots the agent ramdisk in QEMU and checks what its
// PID 1 (internal/ramdisk/rdinit) does on the network: IPv6 by router
// advertisements and DHCPv6, a config drive's network_data.json, VLANs
// named or learned from LLDP, and the clock the agent sets by NTP. The
// provisioning networks are dnsmasq and lldpd in network namespaces behind
// the VM's NIC, so the tests need root, dnsmasq and QEMU; -short skips them.
package ramdisk_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

func TestMain(m *testing.M) {
	// QEMU runs this test binary as its guestfwd relay.
	qemu.MaybeRelay()
	// A private mount namespace (looptest.Main): what the tests mount
	// goes with the test binary however it ends.
	looptest.Main(m.Run)
}

// vlanName is lldpcli's oui-info of an 802.1 VLAN Name TLV: the ID, the
// name's length, the name.
func vlanName(id int, name string) string {
	b := []string{fmt.Sprintf("%02x,%02x,%02x", id>>8, id&0xff, len(name))}
	for _, c := range []byte(name) {
		b = append(b, fmt.Sprintf("%02x", c))
	}
	return strings.Join(b, ",")
}
