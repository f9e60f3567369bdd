package multipath

import (
	"reflect"
	"strings"
	"testing"
)

// Status lines as dm-mpath writes them (dmsetup status's text after the
// target type): multipath-tools' defaults, other selectors and groups,
// queueing and a hardware handler.
func TestParseStatus(t *testing.T) {
	for _, c := range []struct {
		name, status string
		want         []PathState
	}{
		{"two paths, service-time, both active", "2 0 0 0 1 1 A 0 2 2 8:0 A 0 0 1 8:16 A 0 0 1",
			[]PathState{{"8:0", true, 0}, {"8:16", true, 0}}},
		{"one failed three times", "2 0 0 0 1 1 A 0 2 2 8:0 A 0 0 1 8:16 F 3 0 1",
			[]PathState{{"8:0", true, 0}, {"8:16", false, 3}}},
		{"no groups", "2 0 0 0 0 0", nil},
		{"queue_if_no_path, alua handler, two groups, round-robin", "2 1 4 1 alua 2 1 E 0 1 1 65:32 A 0 1000 A 0 1 1 8:48 F 1 1000",
			[]PathState{{"65:32", true, 0}, {"8:48", false, 1}}},
		{"a bypassed group, queue-length", "2 0 0 0 2 2 D 0 1 1 8:0 F 9 0 A 0 1 1 8:16 A 0 0",
			[]PathState{{"8:0", false, 9}, {"8:16", true, 0}}},
		{"a future selector with group arguments", "3 0 0 0 0 1 1 A 2 x y 1 0 259:1 A 0",
			[]PathState{{"259:1", true, 0}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseStatus(c.status)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("%+v, want %+v", got, c.want)
			}
		})
	}
}

func TestParseStatusBad(t *testing.T) {
	for _, c := range []struct{ status, says string }{
		{"", "ends before the number of features"},
		{"2 0", "2 features announced"},
		{"x", "is not a count"},
		{"0 0 1 1 A 0 1 2 8:0 A 0 0", "1 words left"},
		{"0 0 1 1 B 0 1 0 8:0 A 0", `state "B"`},
		{"0 0 1 1 A 0 1 0 sda A 0", "not major:minor"},
		{"0 0 1 1 A 0 1 0 8:0 X 0", `state "X"`},
		{"0 0 1 1 A 0 1 0 8:0 A many", "fail count"},
		{"0 0 1 1 A 0 1 0 8:0 A 0 extra", "words left after the last group"},
		{"0 0 1 1 A 0 99999999 0", "is not a count"},
		{"0 0 1 1 A 0 2 0 8:0 A 0", "ends before the path's device"},
	} {
		if _, err := ParseStatus(c.status); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: error %v, want it to say %q", c.status, err, c.says)
		}
	}
}

// FuzzParseStatus: any text gives paths or an error, never a panic, and
// every path it gives is major:minor.
func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{
		"2 0 0 0 1 1 A 0 2 2 8:0 A 0 0 1 8:16 A 0 0 1",
		"2 1 4 1 alua 2 1 E 0 1 1 65:32 A 0 1000 A 0 1 1 8:48 F 1 1000",
		"2 0 0 0 0 0",
		"0 0 1 1 A 0 1 0 8:0 A 0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		paths, err := ParseStatus(s)
		if err != nil {
			return
		}
		for _, p := range paths {
			if !validDev(p.Dev) {
				t.Errorf("path %q from %q", p.Dev, s)
			}
		}
	})
}
