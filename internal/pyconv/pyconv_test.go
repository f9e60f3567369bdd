package pyconv

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"testing"
)

func TestStr(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
	}{
		{nil, "None"}, {"x y", "x y"}, {true, "True"}, {false, "False"},
		{float64(10), "10"}, {float64(-3), "-3"}, {2.5, "2.5"}, {1e300, "1e+300"},
		{json.Number("12"), "12"}, {7, "7"}, {int64(-9), "-9"},
	} {
		if got := Str(c.in); got != c.want {
			t.Errorf("Str(%#v) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := Repr("a\"b"); got != `"a\"b"` {
		t.Errorf("Repr = %s", got)
	}
}

func TestParseInt(t *testing.T) {
	for _, c := range []struct {
		in     string
		want   int64
		ok     bool
		range_ bool
	}{
		{"10", 10, true, false}, {" +10\t", 10, true, false}, {"-1_000", -1000, true, false},
		{"1__0", 0, false, false}, {"_1", 0, false, false}, {"1_", 0, false, false},
		{"", 0, false, false}, {"+", 0, false, false}, {"0x10", 0, false, false}, {"1.0", 0, false, false},
		{"99999999999999999999", math.MaxInt64, false, true},
		{"-99999999999999999999", math.MinInt64, false, true},
	} {
		got, err := ParseInt(c.in)
		if (err == nil) != c.ok || got != c.want || errors.Is(err, strconv.ErrRange) != c.range_ {
			t.Errorf("ParseInt(%q) = %d, %v; want %d ok=%v range=%v", c.in, got, err, c.want, c.ok, c.range_)
		}
	}
}

func TestInt(t *testing.T) {
	for _, c := range []struct {
		in   any
		want int64
		ok   bool
	}{
		{float64(4), 4, true}, {float64(1 << 53), 1 << 53, true}, {float64(1<<53) * 2, 0, false},
		{2.5, 0, false}, {3, 3, true}, {int64(5), 5, true}, {json.Number("6"), 6, true},
		{" 7 ", 7, true}, {"x", 0, false}, {true, 0, false}, {nil, 0, false}, {[]any{}, 0, false},
	} {
		got, err := Int(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Int(%#v) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestBool(t *testing.T) {
	for _, c := range []struct {
		in   any
		want bool
		ok   bool
	}{
		{true, true, true}, {false, false, true}, {"Yes", true, true}, {" off ", false, true},
		{"T", true, true}, {"n", false, true}, {float64(1), true, true}, {float64(0), false, true},
		{float64(2), false, false}, {"", false, false}, {nil, false, false}, {"maybe", false, false},
	} {
		got, err := Bool(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Bool(%#v) = %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
	if _, err := Bool("maybe"); err == nil || err.Error() != `"maybe" is not a boolean` {
		t.Errorf("Bool error = %v", err)
	}
}

// FuzzParseInt checks ParseInt against strconv on what both accept, and
// that it never panics on any input.
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "-1_2", " 42 ", "99999999999999999999", "1__1", "\u00a012"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseInt(s)
		if m, serr := strconv.ParseInt(s, 10, 64); serr == nil && (err != nil || n != m) {
			t.Fatalf("ParseInt(%q) = %d, %v; strconv says %d", s, n, err, m)
		}
		if _, berr := ParseBool(s); berr == nil && err == nil && n != 0 && n != 1 {
			t.Fatalf("%q parses as both boolean and integer %d", s, n)
		}
	})
}

func TestTruthy(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want bool
	}{{nil, false}, {false, false}, {true, true}, {"", false}, {"0", true}, {0.0, false}, {2.0, true},
		{[]any{}, false}, {[]any{nil}, true}, {map[string]any{}, false}, {map[string]any{"a": nil}, true}} {
		if got := Truthy(tc.v); got != tc.want {
			t.Errorf("Truthy(%#v) = %v", tc.v, got)
		}
	}
}
