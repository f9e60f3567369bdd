// Package netbed holds the network beds of the VM test bed: a network
// namespace with a tap and lldpd (Netns), a provisioning network with
// dnsmasq (ProvNet), an LACP bond switch (BondSwitch) and an 802.1Q trunk
// (Trunk) the test plays itself. Package netnstest, below it, is the
// lighter kit of the namespace tests that boot no VM.
package netbed
