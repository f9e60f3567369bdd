// Package ipadiff compares an inspection document IPA reported with ours
// field by field, against a reviewed allow-list of the differences that
// are right or harmless. e2e/vm's side-by-side tests compare live runs
// with it; the collector's tests compare a recorded fixture tree with what
// IPA reported on the same machine.
package ipadiff

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
)

// Difference is one leaf where IPA's document and ours differ. Path names
// list elements by their "name" (disks, interfaces) or "bus" (PCI devices)
// when they have one, else by index:
// inventory.disks[serial=LAB-SCSI-0001].name, pci_devices[bus=0000:00:03.0].class
// (see listKey).
type Difference struct {
	Path      string
	IPA, Ours any
}

func (d Difference) String() string {
	return fmt.Sprintf("%s: IPA %s, ours %s", d.Path, shortJSON(d.IPA), shortJSON(d.Ours))
}

// Absent stands for a key one side does not have.
type Absent struct{}

// MarshalJSON shows the missing key in a Difference.
func (Absent) MarshalJSON() ([]byte, error) { return []byte(`"<absent>"`), nil }

func shortJSON(v any) string {
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	b := strings.TrimSpace(buf.String())
	if len(b) > 160 {
		return string(b[:160]) + "..."
	}
	return string(b)
}

// Compare returns every leaf where ipa and ours (decoded JSON) differ,
// sorted by path within each object.
func Compare(ipa, ours any) []Difference {
	var out []Difference
	diffJSON("", ipa, ours, &out)
	return out
}

// diffJSON appends to out every leaf where ipa and ours differ below path.
func diffJSON(path string, ipa, ours any, out *[]Difference) {
	switch a := ipa.(type) {
	case map[string]any:
		b, ok := ours.(map[string]any)
		if !ok {
			break
		}
		diffMaps(path, "%s.%s", a, b, out)
		return
	case []any:
		b, ok := ours.([]any)
		if !ok {
			break
		}
		if key := listKey(a, b); key != "" {
			byKey := func(l []any) map[string]any {
				m := map[string]any{}
				for _, e := range l {
					m[fmt.Sprint(e.(map[string]any)[key])] = e
				}
				return m
			}
			diffMaps(path, "%s["+key+"=%s]", byKey(a), byKey(b), out)
			return
		}
		if len(a) != len(b) {
			break
		}
		for i := range a {
			diffJSON(fmt.Sprintf("%s[%d]", path, i), a[i], b[i], out)
		}
		return
	}
	if !reflect.DeepEqual(ipa, ours) {
		*out = append(*out, Difference{Path: path, IPA: ipa, Ours: ours})
	}
}

// diffMaps compares a and b key by key, a key one side lacks against
// Absent; format makes a child's path from path and the key.
func diffMaps(path, format string, a, b map[string]any, out *[]Difference) {
	ks := slices.Sorted(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	for _, k := range ks {
		va, okA := a[k]
		vb, okB := b[k]
		switch {
		case !okA:
			va = Absent{}
		case !okB:
			vb = Absent{}
		}
		child := fmt.Sprintf(format, path, k)
		if path == "" {
			child = strings.TrimPrefix(child, ".")
		}
		diffJSON(child, va, vb, out)
	}
}

// listKey is the key that names the elements of both lists, the first of
// mac_address (NICs), serial (disks), name, bus (PCI devices), cpu (NUMA)
// and step (clean, deploy and service steps) of which every element has a
// distinct value: the two kernels may name and order the same devices
// differently, and the agents list their steps in their own order.
func listKey(a, b []any) string {
	for _, key := range []string{"mac_address", "serial", "name", "bus", "cpu", "step"} {
		ok := len(a)+len(b) > 0
		for _, l := range [][]any{a, b} {
			seen := map[string]bool{}
			for _, e := range l {
				m, isMap := e.(map[string]any)
				v, has := m[key]
				if !isMap || !has || seen[fmt.Sprint(v)] {
					ok = false
					break
				}
				seen[fmt.Sprint(v)] = true
			}
		}
		if ok {
			return key
		}
	}
	return ""
}

// Allowed is one entry of a reviewed allow-list (a JSON list of them, such
// as e2e/vm/testdata/ipa13-differences.json): the paths it covers ("*"
// matches any run of characters) and why the difference is right or
// harmless.
type Allowed struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// LoadAllowList reads the allow-list file; every entry needs a path and a
// reason.
func LoadAllowList(file string) ([]Allowed, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var l []Allowed
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for i, a := range l {
		if a.Path == "" || strings.TrimSpace(a.Reason) == "" {
			return nil, fmt.Errorf("%s: entry %d: a path and a reason are required", file, i)
		}
	}
	return l, nil
}

// Match matches s against pattern, where "*" is any run of characters
// (also dots and brackets, unlike path.Match).
func Match(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

// Sort splits diffs into those the allow-list covers, by the path of the
// first entry that matches, and those it does not.
func Sort(diffs []Difference, allow []Allowed) (allowed map[string][]Difference, unexplained []Difference) {
	allowed = map[string][]Difference{}
	for _, d := range diffs {
		i := slices.IndexFunc(allow, func(a Allowed) bool { return Match(a.Path, d.Path) })
		if i < 0 {
			unexplained = append(unexplained, d)
			continue
		}
		allowed[allow[i].Path] = append(allowed[allow[i].Path], d)
	}
	return allowed, unexplained
}

// T is the part of testing.TB that Check uses.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
}

// Check compares IPA's document and ours field by field and fails t for
// each difference allow does not cover (prefix names the comparison); it
// returns the covered ones by allow-list entry, logging them when
// logAllowed is set.
func Check(t T, prefix string, ipa, ours any, allow []Allowed, logAllowed bool) map[string][]Difference {
	t.Helper()
	allowed, unexplained := Sort(Compare(ipa, ours), allow)
	if logAllowed {
		for _, a := range allow {
			for _, d := range allowed[a.Path] {
				t.Logf("%sallowed (%s): %s", prefix, a.Path, d)
			}
		}
	}
	for _, d := range unexplained {
		t.Errorf("%sunexplained difference: %s", prefix, d)
	}
	return allowed
}
