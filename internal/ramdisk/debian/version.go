package debian

import "strings"

// CompareVersions orders two Debian package versions as dpkg does
// ([epoch:]upstream[-revision]): negative when a < b, zero when equal,
// positive when a > b. A missing epoch is 0; a missing revision sorts as
// an empty one; within each part, runs of non-digits compare with '~'
// before everything (even the end), letters before other characters, and
// runs of digits compare numerically.
func CompareVersions(a, b string) int {
	ea, ua, ra := splitVersion(a)
	eb, ub, rb := splitVersion(b)
	if c := compareNumber(ea, eb); c != 0 {
		return c
	}
	if c := comparePart(ua, ub); c != 0 {
		return c
	}
	return comparePart(ra, rb)
}

func splitVersion(v string) (epoch, upstream, revision string) {
	v = strings.TrimSpace(v)
	if e, rest, ok := strings.Cut(v, ":"); ok {
		epoch, v = e, rest
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		return epoch, v[:i], v[i+1:]
	}
	return epoch, v, ""
}

// order is dpkg's weight of one character of a non-digit run.
func order(c byte, end bool) int {
	switch {
	case end:
		return 0
	case c == '~':
		return -1
	case c >= '0' && c <= '9':
		return 0
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return int(c)
	default:
		return int(c) + 256
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func comparePart(a, b string) int {
	for a != "" || b != "" {
		// The non-digit run.
		for (a != "" && !isDigit(a[0])) || (b != "" && !isDigit(b[0])) {
			oa, ob := order(first(a), a == ""), order(first(b), b == "")
			if a != "" && isDigit(a[0]) {
				oa = 0
			}
			if b != "" && isDigit(b[0]) {
				ob = 0
			}
			if oa != ob {
				return oa - ob
			}
			a, b = rest(a), rest(b)
		}
		// The digit run.
		var da, db string
		da, a = digits(a)
		db, b = digits(b)
		if c := compareNumber(da, db); c != 0 {
			return c
		}
	}
	return 0
}

func first(s string) byte {
	if s == "" {
		return 0
	}
	return s[0]
}

func rest(s string) string {
	if s == "" {
		return s
	}
	return s[1:]
}

func digits(s string) (run, after string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// compareNumber compares decimal digit strings of any length.
func compareNumber(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}
