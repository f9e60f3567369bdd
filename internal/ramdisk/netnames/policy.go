package netnames

import "fmt"

// Policy is one entry of a .link file's NamePolicy= or
// AlternativeNamesPolicy=.
type Policy string

// The policies of systemd.link(5).
const (
	PolicyKernel   Policy = "kernel"
	PolicyKeep     Policy = "keep"
	PolicyDatabase Policy = "database"
	PolicyOnboard  Policy = "onboard"
	PolicySlot     Policy = "slot"
	PolicyPath     Policy = "path"
	PolicyMAC      Policy = "mac"
)

// Link is the part of a systemd .link file that names an interface.
type Link struct {
	File                   string
	NamePolicy             []Policy
	AlternativeNamesPolicy []Policy
}

// The .link files of Debian forky's systemd 262 that match a NIC, in the
// order udev tries them (the first that matches is used).
var (
	// USBByMAC is 73-usb-net-by-mac.link: USB NICs (Path=*-usb-*) with a
	// permanent MAC are named by it, since their place on the bus changes
	// with the port they are plugged into.
	USBByMAC = Link{File: "73-usb-net-by-mac.link", NamePolicy: []Policy{PolicyKeep, PolicyMAC}}
	// DefaultLink is 99-default.link.
	DefaultLink = Link{File: "99-default.link",
		NamePolicy:             []Policy{PolicyKeep, PolicyKernel, PolicyDatabase, PolicyOnboard, PolicySlot, PolicyPath},
		AlternativeNamesPolicy: []Policy{PolicyDatabase, PolicyOnboard, PolicySlot, PolicyPath, PolicyMAC}}
)

// LinkFor is the .link file udev applies to id.
func LinkFor(id ID) Link {
	if id.USB && id.MAC != "" {
		return USBByMAC
	}
	return DefaultLink
}

func (id ID) byPolicy(p Policy) string {
	switch p {
	case PolicyDatabase:
		return id.Database
	case PolicyOnboard:
		return id.Onboard
	case PolicySlot:
		return id.Slot
	case PolicyPath:
		return id.Path
	case PolicyMAC:
		return id.MAC
	}
	return ""
}

// Decision is the name udev gives an interface and why.
type Decision struct {
	// Name is the new name; "" keeps the kernel's.
	Name string
	// Why says which rule or policy decided, for the log.
	Why string
	// AltNames are the alternative names to add (without Name).
	AltNames []string
}

// Decide applies udev's naming to id: 73-special-net-names.rules' NAME=,
// then the NamePolicy of the .link file that matches, unless policies is
// false (net.ifnames=0), and the AlternativeNamesPolicy, which
// net.ifnames=0 leaves on, as systemd does.
func Decide(id ID, policies bool) Decision {
	link := LinkFor(id)
	var d Decision
	switch {
	case id.Special != "":
		d = Decision{Name: id.Special, Why: "73-special-net-names.rules"}
	case !policies:
		d.Why = "net.ifnames=0"
	default:
		d.Why = link.File + ": no policy yields a name"
	policy:
		for _, p := range link.NamePolicy {
			switch p {
			case PolicyKernel:
				if id.NameAssignType == NamePredictable {
					d.Why = link.File + ": kernel: the kernel's name is predictable"
					break policy
				}
			case PolicyKeep:
				if id.NameAssignType == NameUser || id.NameAssignType == NameRenamed {
					d.Why = link.File + ": keep: named by user space already"
					break policy
				}
			default:
				if n := id.byPolicy(p); ValidName(n) {
					d.Name, d.Why = n, fmt.Sprintf("%s: %s", link.File, p)
					break policy
				}
			}
		}
	}
	final := d.Name
	if final == "" {
		final = id.Interface
	}
	for _, p := range link.AlternativeNamesPolicy {
		n := id.byPolicy(p)
		if n == "" || n == final || !validAltName(n) || contains(d.AltNames, n) {
			continue
		}
		d.AltNames = append(d.AltNames, n)
	}
	if d.Name == id.Interface {
		d.Name = ""
	}
	return d
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ValidName is systemd's ifname_valid: what the kernel takes as an
// interface name (1 to 15 bytes of printable ASCII but '/', ':' and '%',
// not "." or "..", nor "all" or "default" as in /proc/sys/net) and not all
// digits, which would read as an ifindex.
func ValidName(s string) bool { return validIfname(s, 16) }

// validAltName is ifname_valid_full(IFNAME_VALID_ALTERNATIVE): up to 127
// bytes.
func validAltName(s string) bool { return validIfname(s, 128) }

func validIfname(s string, size int) bool {
	if s == "" || len(s) >= size || s == "." || s == ".." || s == "all" || s == "default" {
		return false
	}
	digits := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '/' || c == ':' || c == '%' || c <= ' ' || c >= 0x7f {
			return false
		}
		digits = digits && c >= '0' && c <= '9'
	}
	return !digits
}
