package netup

import "github.com/vishvananda/netlink"

// VethsAsNICs makes n take veth links for NICs, as the namespace tests'
// helper processes (package netup_test) need.
func VethsAsNICs(n *Network) { n.isNIC = func(l netlink.Link) bool { return l.Type() == "veth" } }
