package netnames

import (
	"errors"
	"strconv"
	"strings"
)

var errNumber = errors.New("not a number")

// cSpace is C's isspace.
const cSpace = " \t\n\v\f\r"

// parseUnsigned reads an unsigned 32-bit number as systemd's safe_atou
// does: leading white space, then 0x, 0o or 0b for another base, else
// decimal; nothing may follow.
func parseUnsigned(s string) (uint32, error) {
	v, err := parseUnsigned64(s)
	if err != nil || v > 0xffffffff {
		return 0, errNumber
	}
	return uint32(v), nil
}

// parseUnsigned64 is parseUnsigned for 64 bits (safe_atou64).
func parseUnsigned64(s string) (uint64, error) {
	s = strings.TrimLeft(s, cSpace)
	base := 10
	switch {
	case hasPrefixFold(s, "0x"):
		s, base = s[2:], 16
	case hasPrefixFold(s, "0o"):
		s, base = s[2:], 8
	case hasPrefixFold(s, "0b"):
		s, base = s[2:], 2
	}
	return strtoul(s, base)
}

func hasPrefixFold(s, p string) bool {
	return len(s) >= len(p) && strings.EqualFold(s[:len(p)], p)
}

// parseUnsignedBase reads a 32-bit number in base (safe_atou_full with a
// base).
func parseUnsignedBase(s string, base int) (uint32, error) {
	v, err := strtoul(strings.TrimLeft(s, cSpace), base)
	if err != nil || v > 0xffffffff {
		return 0, errNumber
	}
	return uint32(v), nil
}

// strtoul is C's, refusing what safe_atou refuses: nothing parsed,
// anything left over, a negative number other than -0, overflow.
func strtoul(s string, base int) (uint64, error) {
	s = strings.TrimLeft(s, cSpace)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if base == 16 && hasPrefixFold(s, "0x") && len(s) > 2 {
		s = s[2:]
	}
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, errNumber
	}
	v, err := strconv.ParseUint(s, base, 64)
	if err != nil || (neg && v != 0) {
		return 0, errNumber
	}
	return v, nil
}

// parseInt reads a signed decimal (an ifindex).
func parseInt(s string) (int, error) {
	return strconv.Atoi(strings.TrimSpace(s))
}

// parseBool is systemd's parse_boolean, true side: a sysfs flag is "1".
func parseBool(s string) bool {
	switch strings.ToLower(s) {
	case "1", "yes", "y", "true", "t", "on":
		return true
	}
	return false
}
