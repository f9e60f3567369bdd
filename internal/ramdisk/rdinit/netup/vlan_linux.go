package netup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/lldp"
)

// vlanModule is the kernel module of 802.1Q VLAN links.
const vlanModule = "8021q"

// explicitVLANs creates the VLAN links of the requests that name their ID
// (PARENT.ID), on the NIC named or with that MAC, and returns them up. A
// parent that is not there or a link the kernel refuses is logged, naming
// the entry, and skipped, as IPA does.
func (n *Network) explicitVLANs(reqs []VLANRequest, nics []netlink.Link) []netlink.Link {
	var out []netlink.Link
	for _, r := range reqs {
		if r.FromLLDP() {
			continue
		}
		parent := findParent(r, nics)
		if parent == nil {
			n.log.Error("VLAN interface not created: no such NIC", "entry", r.Entry, "param", ParamVLANs)
			continue
		}
		if l, err := n.addVLAN(parent, r.ID, nil); err != nil {
			n.log.Error("VLAN interface not created", "entry", r.Entry, "param", ParamVLANs, "error", err)
		} else if l != nil {
			out = append(out, l)
		}
	}
	return out
}

// findParent is IPA's match of an entry's interface: a name, or a MAC
// compared without case.
func findParent(r VLANRequest, nics []netlink.Link) netlink.Link {
	for _, l := range nics {
		a := l.Attrs()
		if r.MAC && a.HardwareAddr.String() == r.Parent || !r.MAC && a.Name == r.Parent {
			return l
		}
	}
	return nil
}

// lldpParents returns the NICs whose LLDP neighbour says which VLANs to
// create: every NIC for "all", the named ones for bare names. Without
// ipa-collect-lldp IPA creates none of them, and neither does the init.
func (n *Network) lldpParents(reqs []VLANRequest, nics []netlink.Link) []netlink.Link {
	var out []netlink.Link
	add := func(l netlink.Link) {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	for _, r := range reqs {
		if !r.FromLLDP() {
			continue
		}
		if !n.cfg.CollectLLDP {
			n.log.Error("VLAN interfaces not created: learning them needs LLDP, and "+ParamCollectLLDP+" is not set (as in IPA)",
				"entry", r.Entry, "param", ParamVLANs)
			continue
		}
		if r.All {
			for _, l := range nics {
				add(l)
			}
			continue
		}
		if l := findParent(r, nics); l != nil {
			add(l)
		} else {
			n.log.Error("VLAN interfaces not created: no such NIC", "entry", r.Entry, "param", ParamVLANs)
		}
	}
	return out
}

// learnedVLANs creates, on each parent, the VLANs its LLDP neighbour
// announces (lldpVLANs), and returns them up.
func (n *Network) learnedVLANs(ctx context.Context, parents []netlink.Link) []netlink.Link {
	names := make([]string, len(parents))
	for i, l := range parents {
		names[i] = l.Attrs().Name
	}
	learned := n.lldpVLANs(ctx, names)
	var out []netlink.Link
	for _, parent := range parents {
		name := parent.Attrs().Name
		for _, id := range learned[name] {
			if l, err := n.addVLAN(parent, id, nil); err != nil {
				n.log.Error("VLAN interface not created", "link", name, "vlan", id, "from", "LLDP", "error", err)
			} else if l != nil {
				out = append(out, l)
			}
		}
	}
	return out
}

// lldpVLANs listens for LLDP on the named links (up to the LLDP timeout,
// less when every one has heard a frame) and returns, per link, the VLANs
// its neighbour's 802.1 VLAN Name TLVs announce, which is what IPA reads
// (not the Port VLAN ID: that is the untagged VLAN, already on the NIC).
func (n *Network) lldpVLANs(ctx context.Context, names []string) map[string][]int {
	t := time.Now()
	heard, err := lldp.Capture(ctx, names, n.cfg.LLDPTimeout, n.log)
	if err != nil {
		n.log.Warn("LLDP capture for VLANs", "error", err)
	}
	out := map[string][]int{}
	for _, name := range names {
		ids, bad := announcedVLANs(heard[name])
		for _, id := range bad {
			n.log.Warn("LLDP neighbour announces a VLAN ID outside 1-4094: not created", "link", name, "vlan", id)
		}
		n.log.Info(EventVLANsFromLLDP, "link", name, "vlans", fmt.Sprint(ids), "heard", len(heard[name]) > 0,
			"seconds", logging.Seconds(time.Since(t)))
		out[name] = ids
	}
	return out
}

// announcedVLANs reads the VLAN IDs of a frame's 802.1 VLAN Name TLVs
// (OUI 00-80-C2, subtype 3, the ID in the next two bytes) as IPA's
// _add_vlans_from_lldp does: only the ID matters, so a TLV cut short after
// it still counts (lldp.DecodeVLANName, lenient). IDs come once each, in
// frame order; out-of-range ones are returned apart.
func announcedVLANs(tlvs []inventory.LLDPTLV) (ids, bad []int) {
	raw, err := lldp.DecodeHex(tlvs)
	if err != nil {
		return nil, nil // Capture hex-encodes what it read: cannot happen
	}
	for _, t := range raw {
		if t.Type != lldp.TypeOrgSpecific {
			continue
		}
		info, ok := lldp.VLANNameInfo(t.Value)
		if !ok {
			continue
		}
		vlan, err := lldp.DecodeVLANName(info, true)
		if err != nil {
			continue // no VLAN ID
		}
		id := vlan.ID
		switch {
		case id < minVLANID || id > maxVLANID:
			if !slices.Contains(bad, id) {
				bad = append(bad, id)
			}
		case !slices.Contains(ids, id):
			ids = append(ids, id)
		}
	}
	return ids, bad
}

// addVLAN creates VLAN id on parent, named as IPA names it, with MAC mac
// (nil: the parent's), and sets it up. A link of that name that exists
// already is left alone and not returned (IPA: "has already been added"),
// so it gets no second DHCP client. The 802.1Q module is loaded first,
// once.
func (n *Network) addVLAN(parent netlink.Link, id int, mac net.HardwareAddr) (netlink.Link, error) {
	name, err := vlanLinkName(parent.Attrs().Name, id)
	if err != nil {
		return nil, err
	}
	if _, err := netlink.LinkByName(name); err == nil {
		n.log.Info("VLAN interface exists already", "link", name)
		return nil, nil
	}
	n.ensureModule(&n.vlanModuleOnce, vlanModule, EventVLANModule)
	v := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: parent.Attrs().Index, HardwareAddr: mac}, VlanId: id}
	if err := netlink.LinkAdd(v); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return nil, fmt.Errorf("create %s on %s: the kernel has no 802.1Q VLAN support (module %s): %w", name, parent.Attrs().Name, vlanModule, err)
		}
		return nil, fmt.Errorf("create %s on %s: %w", name, parent.Attrs().Name, err)
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("created %s, but cannot find it: %w", name, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return nil, fmt.Errorf("set %s up: %w", name, err)
	}
	n.log.Info(EventVLANInterfaceCreated, "link", name, "parent", parent.Attrs().Name, "vlan", id)
	return l, nil
}

// ensureModule loads a module the kernel may lack (8021q, bonding) before
// its first use, once; a failure is logged, and the netlink call that
// follows says what the kernel could not do.
func (n *Network) ensureModule(once *sync.Once, name, what string) {
	once.Do(func() {
		if n.loadModule == nil {
			return
		}
		t := time.Now()
		if err := n.loadModule(name); err != nil {
			n.log.Warn(what, "error", err)
		} else {
			n.log.Info(what+" ready", "module", name, "seconds", logging.Seconds(time.Since(t)))
		}
	})
}
