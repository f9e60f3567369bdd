// Package netnames gives the ramdisk's NICs the names systemd-udev gives
// them in IPA 13's images (Debian forky, systemd 262): the net_id builtin's
// ID_NET_NAME_ONBOARD, _SLOT, _PATH and _MAC names computed from sysfs, the
// NamePolicy of systemd's 99-default.link and 73-usb-net-by-mac.link, and
// the fixed names of udev's 73-special-net-names.rules. An operator's
// parameters and the inventory then name a NIC the way IPA's do.
//
// What it covers is what servers carry: PCI (onboard index, hotplug and
// ACPI slot numbers, bus path, SR-IOV virtual functions and
// representors, ARI, multi-port functions), USB, ACPI platform devices and
// Xen netfront. It leaves out what servers booting this ramdisk do not
// have: devicetree aliases, s390 CCW, POWER VIO, BCMA, netdevsim, MCTP
// and auxiliary sub-functions; those NICs keep the kernel's name.
package netnames

import (
	"fmt"
	"strings"
)

// flag is one of systemd's naming-scheme features
// (src/shared/netif-naming-scheme.h); only the ones that change a name
// this package computes are here.
type flag uint32

const (
	flagSRIOVV flag = 1 << iota
	flagNPARARI
	flagInfiniband
	flagZeroACPIIndex
	flagBridgeNoSlot
	flagSlotFunctionID
	flag16BitIndex
	flagXenVIF
	flagBridgeMultifunctionSlot
	flagUSBHost
	flagSRIOVR
	flagFirmwareNodeSun
)

// Scheme is a systemd naming scheme: the name net.naming_scheme= takes and
// the features it enables.
type Scheme struct {
	Name  string
	flags flag
}

func (s Scheme) has(f flag) bool { return s.flags&f == f }

// schemes are systemd 262's, oldest first. Schemes that only changed what
// this package does not name (MAC address policy, nspawn, devicetree,
// ID_NET_NAME, MCTP, sub-functions) repeat their predecessor's features.
var schemes = func() []Scheme {
	v238 := flag(0)
	v239 := v238 | flagSRIOVV | flagNPARARI
	v240 := v239 | flagInfiniband | flagZeroACPIIndex
	v247 := v240 | flagBridgeNoSlot
	v249 := v247 | flagSlotFunctionID | flag16BitIndex
	v250 := v249 | flagXenVIF
	v251 := v250 | flagBridgeMultifunctionSlot
	v253 := v251 | flagUSBHost
	v254 := v253 | flagSRIOVR
	v255 := v254 &^ flagBridgeMultifunctionSlot
	v257 := v255 | flagFirmwareNodeSun
	return []Scheme{
		{"v238", v238}, {"v239", v239}, {"v240", v240}, {"v241", v240}, {"v243", v240}, {"v245", v240},
		{"v247", v247}, {"v249", v249}, {"v250", v250}, {"v251", v251}, {"v252", v251}, {"v253", v253},
		{"v254", v254}, {"v255", v255}, {"v257", v257}, {"v258", v257}, {"v259", v257}, {"v260", v257},
		{"v261", v257},
	}
}()

// DefaultScheme is the scheme of IPA 13's images: Debian forky builds
// systemd 262 with the latest scheme as its default, v261 (what `udevadm
// test-builtin net_id` reports there as ID_NET_NAMING_SCHEME).
const DefaultScheme = "v261"

// SchemeNames lists the schemes ParseScheme knows, oldest first.
func SchemeNames() []string {
	var names []string
	for _, s := range schemes {
		names = append(names, s.Name)
	}
	return names
}

// ParseScheme returns the scheme named as net.naming_scheme= names it
// ("latest" is the newest). An unknown name is an error; systemd then
// logs it and uses its default, which the caller does too.
func ParseScheme(name string) (Scheme, error) {
	if name == "latest" {
		return schemes[len(schemes)-1], nil
	}
	for _, s := range schemes {
		if s.Name == name {
			return s, nil
		}
	}
	return Default(), fmt.Errorf("unknown naming scheme %q (known: latest, %s)", name, strings.Join(SchemeNames(), ", "))
}

// Default is DefaultScheme.
func Default() Scheme {
	for _, s := range schemes {
		if s.Name == DefaultScheme {
			return s
		}
	}
	panic("netnames: DefaultScheme " + DefaultScheme + " is not in the table")
}
