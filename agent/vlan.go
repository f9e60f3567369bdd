package agent

import (
	"strings"

	"github.com/ironic-go/ironic-agent/inventory"
)

// logVLANs answers enable_vlan_interfaces (ipa-enable-vlan-interfaces).
// The ramdisk's init owns its network: it creates the VLAN links and runs
// DHCP on them before starting the agent (internal/ramdisk/rdinit/netup), so that the
// lookup can already go over a tagged provisioning network. The agent
// creates none (a link it made would have no DHCP client) and says which
// VLAN interfaces the inventory holds, with their addresses.
func (a *Agent) logVLANs(inv *inventory.Inventory) {
	v := a.cfg.EnableVLANInterfaces
	if v == "" || inv == nil {
		return
	}
	var vlans []string
	for _, ifc := range inv.Interfaces {
		if _, vid, ok := strings.Cut(ifc.Name, "."); !ok || vid == "" || strings.Trim(vid, "0123456789") != "" {
			continue
		}
		addr := "no IPv4 address"
		if ifc.IPv4Address != nil {
			addr = *ifc.IPv4Address
		}
		vlans = append(vlans, ifc.Name+"="+addr)
	}
	a.log.Info("enable_vlan_interfaces: VLAN links are made by the ramdisk's init, not by the agent",
		"value", v, "vlan_interfaces", vlans)
}
