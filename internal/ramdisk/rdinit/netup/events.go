// Log events of this package that tests wait for on the console: the e2e
// VM tests match these messages (with internal/testbed/logtext.Msg), so
// they refer to the constants, and a reworded message breaks the build,
// not a VM test. Change a message's text only together with its tests.

package netup

const (
	// EventDHCPStart is logged when DHCP starts on a link.
	EventDHCPStart = "DHCP start"
	// EventDHCPLease is logged when a link has a DHCP lease.
	EventDHCPLease = "DHCP lease"
	// EventDHCPRetrying is logged when a link's first DHCP attempt ended without a lease and DHCP goes on in the background.
	EventDHCPRetrying = "no DHCP lease yet; trying again in the background"
	// EventDHCPv6Lease is logged when a link has a DHCPv6 lease.
	EventDHCPv6Lease = "DHCPv6 lease"
	// EventIPv6RouterAdvertisement is logged when a router advertisement was heard on a link.
	EventIPv6RouterAdvertisement = "IPv6 router advertisement"
	// EventIPv6Address is logged when a link has an IPv6 address.
	EventIPv6Address = "IPv6 address"
	// EventResolvConfWritten is logged when resolv.conf was written.
	EventResolvConfWritten = "resolv.conf written"
	// EventNetworkData is logged when network data was found (its device and contents).
	EventNetworkData = "network data"
	// EventNetworkDataApplied is logged when network data was applied.
	EventNetworkDataApplied = "network data applied"
	// EventStaticAddress is logged when a static address from network data was set.
	EventStaticAddress = "static address"
	// EventRoutes is logged when the routes of a network from network data were set.
	EventRoutes = "routes"
	// EventVLANsFromLLDP is logged when the VLANs learned from LLDP on a link.
	EventVLANsFromLLDP = "VLANs from LLDP"
	// EventVLANInterfaceCreated is logged when a VLAN interface was made.
	EventVLANInterfaceCreated = "VLAN interface created"
	// EventVLANModule is logged when the 8021q module could not be loaded (with an error).
	EventVLANModule = "802.1Q module"
	// EventVLANModuleReady is logged when the 8021q module is loaded.
	EventVLANModuleReady = EventVLANModule + " ready"
)
