// Package networkdata reads OpenStack's network_data.json (the file a config
// drive carries at openstack/latest/network_data.json, and what Metal3's
// preprovisioningNetworkDataName puts on the agent's virtual-media ISO):
// links (physical NICs by MAC, bonds, VLANs), networks (static IPv4/IPv6
// with routes, DHCPv4, DHCPv6, SLAAC) and DNS servers. It checks the
// document whole, so a bad field is reported by its path
// (`links[1].bond_mode`) before anything touches a NIC, and it returns
// plain values; applying them is the ramdisk init's job.
package networkdata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// LinkKind is what a link is made of.
type LinkKind int

const (
	Physical LinkKind = iota // a NIC of the machine, found by its MAC
	Bond                     // a bond of physical links
	VLAN                     // an 802.1Q VLAN on a physical link or a bond
)

func (k LinkKind) String() string {
	switch k {
	case Physical:
		return "physical"
	case Bond:
		return "bond"
	case VLAN:
		return "vlan"
	}
	return "LinkKind(" + strconv.Itoa(int(k)) + ")"
}

// Link is one entry of "links".
type Link struct {
	ID   string
	Type string // as written: phy, ethernet, ovs, bond, vlan, ...
	Kind LinkKind
	// MAC is ethernet_mac_address: the NIC to use (Physical), the MAC to
	// give the bond or the VLAN (nil: the kernel's choice). A VLAN's
	// vlan_mac_address wins over its ethernet_mac_address.
	MAC net.HardwareAddr
	MTU int // 0: leave the link's MTU alone
	// Bond is set for Kind Bond, VLAN for Kind VLAN.
	Bond *BondConfig
	VLAN *VLANConfig
}

// BondConfig is a bond link's bond_* fields.
type BondConfig struct {
	Links []string // IDs of physical links
	// Mode is the kernel's name (balance-rr, active-backup, balance-xor,
	// broadcast, 802.3ad, balance-tlb, balance-alb); a number 0-6 is
	// turned into its name.
	Mode string
	// MIIMon is bond_miimon (milliseconds in the document); 0: the
	// kernel's default.
	MIIMon time.Duration
	// XmitHashPolicy is bond_xmit_hash_policy, "" when absent.
	XmitHashPolicy string
}

// VLANConfig is a VLAN link's vlan_link and vlan_id.
type VLANConfig struct {
	Link string // ID of a physical or bond link
	ID   int    // 1-4094
}

// NetworkKind is how a network's addresses are had.
type NetworkKind int

const (
	IPv4Static NetworkKind = iota // "ipv4"
	IPv4DHCP                      // "ipv4_dhcp"
	IPv6Static                    // "ipv6"
	IPv6DHCP                      // "ipv6_dhcp", "ipv6_dhcpv6-stateful"
	IPv6SLAAC                     // "ipv6_slaac", "ipv6_dhcpv6-stateless"
)

// Static reports whether the network's address is in the document.
func (k NetworkKind) Static() bool { return k == IPv4Static || k == IPv6Static }

// IPv6 reports whether the network is an IPv6 one.
func (k NetworkKind) IPv6() bool { return k >= IPv6Static }

var networkTypes = map[string]NetworkKind{
	"ipv4": IPv4Static, "ipv4_dhcp": IPv4DHCP,
	"ipv6": IPv6Static, "ipv6_dhcp": IPv6DHCP, "ipv6_slaac": IPv6SLAAC,
	// Nova writes ipv6_<the subnet's ipv6_address_mode>.
	"ipv6_dhcpv6-stateful": IPv6DHCP, "ipv6_dhcpv6-stateless": IPv6SLAAC,
}

// Network is one entry of "networks".
type Network struct {
	ID   string
	Type string // as written
	Kind NetworkKind
	Link string // ID of the link it is on
	// Address is the static address with its prefix length (Static
	// kinds only).
	Address netip.Prefix
	// Gateway is the network's "gateway" (a default route), zero if none.
	Gateway netip.Addr
	Routes  []Route
	DNS     []netip.Addr // DNS servers of the network's "services"
}

// Route is one entry of a network's "routes".
type Route struct {
	Destination netip.Prefix // 0.0.0.0/0 or ::/0 for a default route
	Gateway     netip.Addr
}

// Data is a whole network_data.json.
type Data struct {
	Links    []Link
	Networks []Network
	DNS      []netip.Addr // DNS servers of the top-level "services"
	// Warnings name what the document holds that nothing acts on
	// (unknown keys, services other than DNS), for the caller to log:
	// they change nothing, and are never dropped unsaid.
	Warnings []string
}

// LinkByID returns the link with that ID, or nil.
func (d *Data) LinkByID(id string) *Link {
	for i := range d.Links {
		if d.Links[i].ID == id {
			return &d.Links[i]
		}
	}
	return nil
}

// maxSize bounds the document: a config drive's network data is a few KB.
const maxSize = 1 << 20

// Bond modes and transmit hash policies the Linux bonding driver knows.
var (
	bondModes        = []string{"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb"}
	xmitHashPolicies = []string{"layer2", "layer3+4", "layer2+3", "encap2+3", "encap3+4", "vlan+srcmac"}
)

// Keys that identify a link or network to OpenStack and mean nothing to
// the machine: accepted without a warning.
var informational = []string{"vif_id", "network_id", "neutron_port_id"}

// Parse reads and checks a network_data.json. The error names the first
// bad field by its path and says why; nothing is half-returned.
func Parse(b []byte) (*Data, error) {
	if len(b) > maxSize {
		return nil, fmt.Errorf("network_data.json: %d bytes, more than %d", len(b), maxSize)
	}
	var top map[string]json.RawMessage
	if err := decode(b, &top); err != nil {
		return nil, fmt.Errorf("network_data.json: %w", err)
	}
	if top == nil {
		return nil, errors.New("network_data.json: not a JSON object")
	}
	p := &parser{d: &Data{}}
	o := p.object("", top)
	for i, raw := range o.list("links") {
		p.link(i, raw)
	}
	for i, raw := range o.list("networks") {
		p.network(i, raw)
	}
	p.d.DNS = p.services("services", o.raw("services"))
	o.done()
	if p.err != nil {
		return nil, p.err
	}
	p.check()
	if p.err != nil {
		return nil, p.err
	}
	return p.d, nil
}

func decode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// parser keeps the first error: later fields of a broken document would
// only add noise.
type parser struct {
	d   *Data
	err error
}

func (p *parser) fail(path, format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("network_data.json: %s: %s", path, fmt.Sprintf(format, args...))
	}
}

// object is one JSON object being read; done reports the keys nobody
// asked for.
type object struct {
	p    *parser
	path string
	m    map[string]json.RawMessage
	used map[string]bool
}

func (p *parser) object(path string, m map[string]json.RawMessage) *object {
	return &object{p: p, path: path, m: m, used: map[string]bool{}}
}

func (o *object) at(key string) string {
	if o.path == "" {
		return key
	}
	return o.path + "." + key
}

// raw returns a key's value, nil when absent or null.
func (o *object) raw(key string) json.RawMessage {
	o.used[key] = true
	v, ok := o.m[key]
	if !ok || string(bytes.TrimSpace(v)) == "null" {
		return nil
	}
	return v
}

func (o *object) has(key string) bool { return o.raw(key) != nil }

func (o *object) str(key string) string {
	v := o.raw(key)
	if v == nil {
		return ""
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		o.p.fail(o.at(key), "want a string, got %s", short(v))
		return ""
	}
	return s
}

// number reads an integer written as a JSON number or a string of digits
// (generators differ), ok false when absent.
func (o *object) number(key string) (n int64, ok bool) {
	v := o.raw(key)
	if v == nil {
		return 0, false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		s = string(bytes.TrimSpace(v))
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		o.p.fail(o.at(key), "want an integer, got %s", short(v))
		return 0, false
	}
	return n, true
}

func (o *object) list(key string) []json.RawMessage {
	v := o.raw(key)
	if v == nil {
		return nil
	}
	var l []json.RawMessage
	if err := json.Unmarshal(v, &l); err != nil {
		o.p.fail(o.at(key), "want a list, got %s", short(v))
		return nil
	}
	return l
}

func (o *object) done() {
	var extra []string
	for k := range o.m {
		if !o.used[k] && !slices.Contains(informational, k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		o.p.d.Warnings = append(o.p.d.Warnings, fmt.Sprintf("%s: unknown key, not applied", o.at(k)))
	}
}

func short(v json.RawMessage) string {
	s := string(bytes.TrimSpace(v))
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

func (p *parser) element(path string, raw json.RawMessage) *object {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		p.fail(path, "want an object, got %s", short(raw))
		return nil
	}
	return p.object(path, m)
}

func (p *parser) link(i int, raw json.RawMessage) {
	path := fmt.Sprintf("links[%d]", i)
	o := p.element(path, raw)
	if o == nil {
		return
	}
	l := Link{ID: o.str("id"), Type: o.str("type")}
	if l.ID == "" {
		p.fail(o.at("id"), "missing")
	}
	switch l.Type {
	case "":
		p.fail(o.at("type"), "missing")
	case "bond":
		l.Kind = Bond
	case "vlan":
		l.Kind = VLAN
	default:
		// Nova's other types (phy, ethernet, ovs, bridge, tap, vif,
		// hw_veb, dvs, hyperv, vhostuser) are all the port of a NIC as
		// the guest sees it.
		l.Kind = Physical
	}
	l.MAC = p.mac(o, "ethernet_mac_address")
	if l.Kind == VLAN {
		if m := p.mac(o, "vlan_mac_address"); m != nil {
			l.MAC = m
		}
	}
	if l.Kind == Physical && l.MAC == nil && p.err == nil {
		p.fail(o.at("ethernet_mac_address"), "missing: a %s link is found by its MAC", l.Type)
	}
	if mtu, ok := o.number("mtu"); ok {
		if mtu < 68 || mtu > 65535 {
			p.fail(o.at("mtu"), "%d is not from 68 to 65535", mtu)
		}
		l.MTU = int(mtu)
	}
	bondKeys := []string{"bond_links", "bond_mode", "bond_miimon", "bond_xmit_hash_policy"}
	vlanKeys := []string{"vlan_link", "vlan_id"}
	switch l.Kind {
	case Bond:
		l.Bond = p.bond(o)
		p.refuse(o, l.Type, "link", vlanKeys)
	case VLAN:
		l.VLAN = p.vlan(o)
		p.refuse(o, l.Type, "link", bondKeys)
	default:
		p.refuse(o, l.Type, "link", append(bondKeys, vlanKeys...))
	}
	o.done()
	p.d.Links = append(p.d.Links, l)
}

// refuse reports keys that belong to another kind of link: acting on them
// is impossible, and dropping them would hide a mistyped "type".
func (p *parser) refuse(o *object, typ, what string, keys []string) {
	for _, k := range keys {
		if o.has(k) {
			p.fail(o.at(k), "not a field of a %q %s", typ, what)
		}
	}
}

func (p *parser) mac(o *object, key string) net.HardwareAddr {
	s := o.str(key)
	if s == "" {
		return nil
	}
	m, err := net.ParseMAC(s)
	if err != nil || len(m) != 6 {
		p.fail(o.at(key), "%q is not an Ethernet MAC address", s)
		return nil
	}
	return m
}

func (p *parser) bond(o *object) *BondConfig {
	b := &BondConfig{}
	for i, raw := range o.list("bond_links") {
		var id string
		if err := json.Unmarshal(raw, &id); err != nil || id == "" {
			p.fail(fmt.Sprintf("%s[%d]", o.at("bond_links"), i), "want a link ID, got %s", short(raw))
			continue
		}
		b.Links = append(b.Links, id)
	}
	if len(b.Links) == 0 {
		p.fail(o.at("bond_links"), "missing or empty: a bond needs links")
	}
	mode := o.str("bond_mode")
	if n, err := strconv.Atoi(mode); err == nil && n >= 0 && n < len(bondModes) {
		mode = bondModes[n]
	}
	switch {
	case mode == "":
		p.fail(o.at("bond_mode"), "missing")
	case !slices.Contains(bondModes, mode):
		p.fail(o.at("bond_mode"), "%q is not a bond mode (want one of %s)", mode, strings.Join(bondModes, ", "))
	}
	b.Mode = mode
	if ms, ok := o.number("bond_miimon"); ok {
		if ms < 0 || ms > math.MaxInt32 {
			p.fail(o.at("bond_miimon"), "%d is not from 0 to %d milliseconds", ms, math.MaxInt32)
		}
		b.MIIMon = time.Duration(ms) * time.Millisecond
	}
	b.XmitHashPolicy = o.str("bond_xmit_hash_policy")
	if b.XmitHashPolicy != "" && !slices.Contains(xmitHashPolicies, b.XmitHashPolicy) {
		p.fail(o.at("bond_xmit_hash_policy"), "%q is not a transmit hash policy (want one of %s)",
			b.XmitHashPolicy, strings.Join(xmitHashPolicies, ", "))
	}
	return b
}

func (p *parser) vlan(o *object) *VLANConfig {
	v := &VLANConfig{Link: o.str("vlan_link")}
	if v.Link == "" {
		p.fail(o.at("vlan_link"), "missing")
	}
	id, ok := o.number("vlan_id")
	switch {
	case !ok:
		p.fail(o.at("vlan_id"), "missing")
	case id < 1 || id > 4094:
		p.fail(o.at("vlan_id"), "%d is not from 1 to 4094", id)
	}
	v.ID = int(id)
	return v
}

func (p *parser) network(i int, raw json.RawMessage) {
	path := fmt.Sprintf("networks[%d]", i)
	o := p.element(path, raw)
	if o == nil {
		return
	}
	n := Network{ID: o.str("id"), Type: o.str("type"), Link: o.str("link")}
	kind, ok := networkTypes[n.Type]
	switch {
	case n.Type == "":
		p.fail(o.at("type"), "missing")
	case !ok:
		p.fail(o.at("type"), "%q is not a network type (want ipv4, ipv4_dhcp, ipv6, ipv6_dhcp or ipv6_slaac)", n.Type)
	}
	n.Kind = kind
	if n.Link == "" {
		p.fail(o.at("link"), "missing")
	}
	if kind.Static() {
		n.Address = p.address(o, kind.IPv6())
	} else {
		// A DHCP or SLAAC network's address comes from the wire: an
		// address here would be silently dropped, so it is refused.
		p.refuse(o, n.Type, "network", []string{"ip_address", "netmask"})
	}
	if g := o.str("gateway"); g != "" {
		n.Gateway = p.addr(o.at("gateway"), g, kind.IPv6())
	}
	for j, raw := range o.list("routes") {
		if r, ok := p.route(fmt.Sprintf("%s[%d]", o.at("routes"), j), raw, kind.IPv6()); ok {
			n.Routes = append(n.Routes, r)
		}
	}
	n.DNS = p.services(o.at("services"), o.raw("services"))
	o.done()
	p.d.Networks = append(p.d.Networks, n)
}

// address reads ip_address and netmask: the mask as a dotted IPv4 mask, an
// IPv6 mask or a prefix length, or the prefix length after a "/" in
// ip_address (then netmask, if given, must agree).
func (p *parser) address(o *object, v6 bool) netip.Prefix {
	s := o.str("ip_address")
	if s == "" {
		p.fail(o.at("ip_address"), "missing: a static network needs an address")
		return netip.Prefix{}
	}
	a, bits, slash := strings.Cut(s, "/")
	ip := p.addr(o.at("ip_address"), a, v6)
	if !ip.IsValid() {
		return netip.Prefix{}
	}
	n := -1
	if slash {
		b, err := strconv.Atoi(bits)
		if err != nil || b < 0 || b > ip.BitLen() {
			p.fail(o.at("ip_address"), "%q: the prefix length is not from 0 to %d", s, ip.BitLen())
			return netip.Prefix{}
		}
		n = b
	}
	if m := o.raw("netmask"); m != nil {
		b, ok := p.maskBits(o.at("netmask"), m, ip)
		if !ok {
			return netip.Prefix{}
		}
		if n >= 0 && n != b {
			p.fail(o.at("netmask"), "/%d disagrees with ip_address's /%d", b, n)
			return netip.Prefix{}
		}
		n = b
	}
	if n < 0 {
		p.fail(o.at("netmask"), "missing: give a netmask or a prefix length in ip_address")
		return netip.Prefix{}
	}
	return netip.PrefixFrom(ip, n)
}

// maskBits reads a netmask of ip's family: a prefix length (number or
// digits) or a contiguous mask.
func (p *parser) maskBits(path string, raw json.RawMessage, ip netip.Addr) (int, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(bytes.TrimSpace(raw))
	}
	s = strings.TrimPrefix(strings.TrimSpace(s), "/")
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > ip.BitLen() {
			p.fail(path, "prefix length %d is not from 0 to %d", n, ip.BitLen())
			return 0, false
		}
		return n, true
	}
	m, err := netip.ParseAddr(s)
	if err != nil || m.Zone() != "" || m.Is4() != ip.Is4() {
		p.fail(path, "%q is not a prefix length or an %s netmask", s, family(ip.Is6()))
		return 0, false
	}
	ones, size := net.IPMask(m.AsSlice()).Size()
	if size == 0 {
		p.fail(path, "%q is not a contiguous netmask", s)
		return 0, false
	}
	return ones, true
}

func family(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

// addr parses an address of the network's family; an IPv4-mapped IPv6
// address is not taken for IPv4.
func (p *parser) addr(path, s string, v6 bool) netip.Addr {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil || a.Zone() != "":
		p.fail(path, "%q is not an IP address", s)
		return netip.Addr{}
	case a.Is6() != v6:
		p.fail(path, "%q is not an %s address, as the network's type wants", s, family(v6))
		return netip.Addr{}
	}
	return a
}

func (p *parser) route(path string, raw json.RawMessage, v6 bool) (Route, bool) {
	o := p.element(path, raw)
	if o == nil {
		return Route{}, false
	}
	defer o.done()
	dst := p.addr(o.at("network"), o.str("network"), v6)
	m := o.raw("netmask")
	if m == nil {
		p.fail(o.at("netmask"), "missing")
		return Route{}, false
	}
	if !dst.IsValid() {
		return Route{}, false
	}
	bits, ok := p.maskBits(o.at("netmask"), m, dst)
	if !ok {
		return Route{}, false
	}
	gw := p.addr(o.at("gateway"), o.str("gateway"), v6)
	if !gw.IsValid() {
		return Route{}, false
	}
	return Route{Destination: netip.PrefixFrom(dst, bits).Masked(), Gateway: gw}, true
}

// services reads a "services" list: the DNS servers it names; other
// services are warned about.
func (p *parser) services(path string, raw json.RawMessage) []netip.Addr {
	if raw == nil {
		return nil
	}
	var l []json.RawMessage
	if err := json.Unmarshal(raw, &l); err != nil {
		p.fail(path, "want a list, got %s", short(raw))
		return nil
	}
	var dns []netip.Addr
	for i, raw := range l {
		o := p.element(fmt.Sprintf("%s[%d]", path, i), raw)
		if o == nil {
			return nil
		}
		typ, addr := o.str("type"), o.str("address")
		if typ != "dns" {
			if typ == "" {
				p.fail(o.at("type"), "missing")
			}
			p.d.Warnings = append(p.d.Warnings, fmt.Sprintf("%s: service %q is not applied (only dns is)", o.path, typ))
			o.done()
			continue
		}
		a, err := netip.ParseAddr(addr)
		if err != nil || a.Zone() != "" {
			p.fail(o.at("address"), "%q is not an IP address", addr)
			return nil
		}
		if !slices.Contains(dns, a) {
			dns = append(dns, a)
		}
		o.done()
	}
	return dns
}

// check resolves the references between links and networks: unique IDs,
// bonds of physical links each in one bond only, VLANs on a physical link
// or a bond, networks on links that exist, MACs of physical links unique.
func (p *parser) check() {
	seen := map[string]int{}
	for i, l := range p.d.Links {
		if j, ok := seen[l.ID]; ok {
			p.fail(fmt.Sprintf("links[%d].id", i), "%q is also links[%d]'s", l.ID, j)
			return
		}
		seen[l.ID] = i
	}
	macs := map[string]int{}
	inBond := map[string]string{}
	for i, l := range p.d.Links {
		switch l.Kind {
		case Physical:
			if j, ok := macs[l.MAC.String()]; ok {
				p.fail(fmt.Sprintf("links[%d].ethernet_mac_address", i), "%s is also links[%d]'s", l.MAC, j)
				return
			}
			macs[l.MAC.String()] = i
		case Bond:
			for k, id := range l.Bond.Links {
				path := fmt.Sprintf("links[%d].bond_links[%d]", i, k)
				j, ok := seen[id]
				switch {
				case !ok:
					p.fail(path, "no link has ID %q", id)
				case p.d.Links[j].Kind != Physical:
					p.fail(path, "%q is a %s link; a bond takes physical links", id, p.d.Links[j].Kind)
				case inBond[id] != "":
					p.fail(path, "%q is in bond %q already", id, inBond[id])
				}
				if p.err != nil {
					return
				}
				inBond[id] = l.ID
			}
		}
	}
	for i, l := range p.d.Links {
		if l.Kind != VLAN {
			continue
		}
		j, ok := seen[l.VLAN.Link]
		path := fmt.Sprintf("links[%d].vlan_link", i)
		switch {
		case !ok:
			p.fail(path, "no link has ID %q", l.VLAN.Link)
		case p.d.Links[j].Kind == VLAN:
			p.fail(path, "%q is a VLAN link; a VLAN goes on a physical link or a bond", l.VLAN.Link)
		case inBond[l.VLAN.Link] != "":
			p.fail(path, "%q is in bond %q: put the VLAN on the bond", l.VLAN.Link, inBond[l.VLAN.Link])
		}
		if p.err != nil {
			return
		}
	}
	for i, n := range p.d.Networks {
		_, ok := seen[n.Link]
		path := fmt.Sprintf("networks[%d].link", i)
		switch {
		case !ok:
			p.fail(path, "no link has ID %q", n.Link)
		case inBond[n.Link] != "":
			p.fail(path, "%q is in bond %q: put the network on the bond", n.Link, inBond[n.Link])
		}
		if p.err != nil {
			return
		}
	}
}
