package netnames

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// Netlink renames links with RTM_SETLINK and adds alternative names with
// RTM_NEWLINKPROP, in the caller's network namespace.
type Netlink struct{}

// Rename renames link from to to; the link must be down, as the init's
// are before the network set-up.
func (Netlink) Rename(from, to string) error {
	l, err := netlink.LinkByName(from)
	if err != nil {
		return fmt.Errorf("find %s: %w", from, err)
	}
	if err := netlink.LinkSetName(l, to); err != nil {
		return fmt.Errorf("rename %s to %s: %w", from, to, err)
	}
	return nil
}

// AddAltName adds alt to link name.
func (Netlink) AddAltName(name, alt string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find %s: %w", name, err)
	}
	if err := netlink.LinkAddAltName(l, alt); err != nil {
		return fmt.Errorf("alternative name %s of %s: %w", alt, name, err)
	}
	return nil
}
