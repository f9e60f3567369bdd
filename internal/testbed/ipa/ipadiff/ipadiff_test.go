package ipadiff

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	var ipa, ours any
	must := func(s string, v *any) {
		if err := json.Unmarshal([]byte(s), v); err != nil {
			t.Fatal(err)
		}
	}
	must(`{"a": 1, "gone": true, "disks": [{"name": "/dev/sda", "size": 1}, {"name": "/dev/sdb", "size": 2}],
	       "l": [1, 2], "pci": [{"bus": "0000:00:01.0", "class": "x"}]}`, &ipa)
	must(`{"a": 1, "new": null, "disks": [{"name": "/dev/sdb", "size": 3}, {"name": "/dev/sda", "size": 1}],
	       "l": [1, 2, 3], "pci": [{"bus": "0000:00:01.0", "class": "y"}]}`, &ours)
	diffs := Compare(ipa, ours)
	var got []string
	for _, d := range diffs {
		got = append(got, d.String())
	}
	want := []string{
		`disks[name=/dev/sdb].size: IPA 2, ours 3`,
		`gone: IPA true, ours "<absent>"`,
		`l: IPA [1,2], ours [1,2,3]`,
		`new: IPA "<absent>", ours null`,
		`pci[bus=0000:00:01.0].class: IPA "x", ours "y"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("differences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	allowed, rest := Sort(diffs, []Allowed{{Path: "disks[*].size", Reason: "r"}, {Path: "pci*", Reason: "r"}})
	if len(allowed["disks[*].size"]) != 1 || len(allowed["pci*"]) != 1 || len(rest) != 3 {
		t.Errorf("allowed %v, rest %v", allowed, rest)
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"a*", "abc", true}, {"*c", "abc", true}, {"a*c", "a.b[x=y].c", true}, {"a", "ab", false}, {"a*d", "abc", false}, {"*b*", "abc", true},
	} {
		if got := Match(c.p, c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

// FuzzCompare: any two JSON documents compare without a panic, and a
// document never differs from itself.
func FuzzCompare(f *testing.F) {
	f.Add(`{"l": [{"name": "a"}, {"name": "a"}]}`, `{"l": [{"name": "a", "x": 1}]}`)
	f.Add(`[{"bus": 1}, {"bus": "1"}]`, `[{"bus": null}]`)
	f.Add(`{"a": [1, {"b": []}]}`, `"x"`)
	f.Fuzz(func(t *testing.T, a, b string) {
		var ipa, ours any
		if json.Unmarshal([]byte(a), &ipa) != nil || json.Unmarshal([]byte(b), &ours) != nil {
			return
		}
		for _, d := range Compare(ipa, ours) {
			_ = d.String()
		}
		if d := Compare(ipa, ipa); len(d) != 0 {
			t.Errorf("%s differs from itself: %v", a, d)
		}
	})
}
