// Package pyconv converts JSON-decoded values the way Ironic, IPA and
// ironic-lib convert them in Python: str(), int() and oslo.utils'
// bool_from_string. The agent reads node fields, step arguments, root-device
// hints and configuration files that Python code wrote or will read, so a
// value must mean here exactly what it means there; this package is the one
// place those rules are written. It imports nothing of ours.
package pyconv

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// maxExactFloat bounds the float64 values taken as integers: beyond 2^53
// a JSON number no longer holds the integer that was written.
const maxExactFloat = 1 << 53

// Str renders a JSON-decoded value as Python's str() renders the value
// json.loads would have produced.
func Str(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case string:
		return x
	case bool:
		if x {
			return "True"
		}
		return "False"
	case json.Number:
		return x.String()
	case float64:
		// encoding/json decodes every number to float64; an integral one
		// was (almost certainly) written as an integer.
		if x == math.Trunc(x) && math.Abs(x) < maxExactFloat {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return fmt.Sprint(v)
}

// Repr is Str, with strings quoted: how an error message shows a value.
func Repr(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return Str(v)
}

// Digits removes underscores that sit between two digits (Python's numeric
// literal rule) and reports whether every other byte is in allowed.
func Digits(s, allowed string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' {
			if i == 0 || i == len(s)-1 || !isDigit(s[i-1]) || !isDigit(s[i+1]) {
				return "", false
			}
			continue
		}
		if !strings.ContainsRune(allowed, rune(c)) {
			return "", false
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// ParseInt parses a string as Python's int() does: surrounding white space,
// one sign, decimal digits with single underscores between them. Python's
// integers are unbounded; a value beyond int64 returns the nearest bound
// with an error wrapping strconv.ErrRange, so a caller that only compares
// may use it and one that stores it refuses it.
func ParseInt(s string) (int64, error) {
	t := strings.TrimFunc(s, unicode.IsSpace)
	sign := ""
	if strings.HasPrefix(t, "+") || strings.HasPrefix(t, "-") {
		sign, t = t[:1], t[1:]
	}
	clean, ok := Digits(t, "0123456789")
	if !ok || clean == "" {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	n, err := strconv.ParseInt(sign+clean, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		if sign == "-" {
			n = math.MinInt64
		} else {
			n = math.MaxInt64
		}
		return n, fmt.Errorf("%q is out of range: %w", s, strconv.ErrRange)
	}
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return n, nil
}

// Int is Python's int() of a JSON value that is meant to hold an integer:
// a number without a fraction (within 2^53, where float64 is exact) or a
// string ParseInt accepts. Booleans, fractions, null and everything else
// are refused: Python would turn True into 1 and 2.5 into 2, which for a
// size or a count hides a mistake.
func Int(v any) (int64, error) {
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > maxExactFloat {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		return int64(x), nil
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case json.Number:
		return ParseInt(x.String())
	case string:
		return ParseInt(x)
	}
	return 0, fmt.Errorf("%s is not an integer", Repr(v))
}

// ParseBool is oslo.utils' bool_from_string(strict=True) of a string: the
// spellings oslo.config and Ironic accept, case and surrounding space
// ignored.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimFunc(s, unicode.IsSpace)) {
	case "1", "t", "true", "on", "y", "yes":
		return true, nil
	case "0", "f", "false", "off", "n", "no":
		return false, nil
	}
	return false, errors.New("not a boolean (want 1/0, true/false, yes/no, on/off)")
}

// Bool is bool_from_string(strict=True) of a JSON value: a boolean as it
// is, anything else through Python's str() (so 1 is true and 2 an error).
func Bool(v any) (bool, error) {
	if b, ok := v.(bool); ok {
		return b, nil
	}
	b, err := ParseBool(Str(v))
	if err != nil {
		return false, fmt.Errorf("%s is not a boolean", Repr(v))
	}
	return b, nil
}

// Truthy is Python's truth value of a JSON-decoded value: None, False, 0,
// "", [] and {} are false, everything else true.
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}
