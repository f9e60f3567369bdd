package vm

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// difference is one leaf where IPA's stored inspection data and ours
// differ. Path names list elements by their "name" (disks, interfaces) or
// "bus" (PCI devices) when they have one, else by index:
// inventory.disks[serial=LAB-SCSI-0001].name, pci_devices[bus=0000:00:03.0].class
// (see listKey).
type difference struct {
	Path      string
	IPA, Ours any
}

func (d difference) String() string {
	return fmt.Sprintf("%s: IPA %s, ours %s", d.Path, shortJSON(d.IPA), shortJSON(d.Ours))
}

// absent stands for a key one side does not have.
type absent struct{}

func (absent) MarshalJSON() ([]byte, error) { return []byte(`"<absent>"`), nil }

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

// diffJSON appends to out every leaf where ipa and ours (decoded JSON)
// differ below path.
func diffJSON(path string, ipa, ours any, out *[]difference) {
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
		*out = append(*out, difference{Path: path, IPA: ipa, Ours: ours})
	}
}

// diffMaps compares a and b key by key, a key one side lacks against
// absent; format makes a child's path from path and the key.
func diffMaps(path, format string, a, b map[string]any, out *[]difference) {
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
			va = absent{}
		case !okB:
			vb = absent{}
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

// allowedDifference is one entry of the reviewed allow-list
// (testdata/ipa13-differences.json): the paths it covers ("*" matches any
// run of characters) and why the difference is right or harmless.
type allowedDifference struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

func loadAllowList(file string) ([]allowedDifference, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var l []allowedDifference
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

// globMatch matches s against pattern, where "*" is any run of characters
// (also dots and brackets, unlike path.Match).
func globMatch(pattern, s string) bool {
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

// sortDifferences splits diffs into those the allow-list covers (with the
// entry) and those it does not; used counts the entries that matched.
func sortDifferences(diffs []difference, allow []allowedDifference) (allowed map[string][]difference, unexplained []difference) {
	allowed = map[string][]difference{}
	for _, d := range diffs {
		i := slices.IndexFunc(allow, func(a allowedDifference) bool { return globMatch(a.Path, d.Path) })
		if i < 0 {
			unexplained = append(unexplained, d)
			continue
		}
		allowed[allow[i].Path] = append(allowed[allow[i].Path], d)
	}
	return allowed, unexplained
}

// checkDifferences compares IPA's document and ours field by field and
// fails t for each difference allow does not cover (prefix names the
// comparison); it returns the covered ones by allow-list entry, logging
// them when logAllowed is set.
func checkDifferences(t *testing.T, prefix string, ipa, ours any, allow []allowedDifference, logAllowed bool) map[string][]difference {
	t.Helper()
	var diffs []difference
	diffJSON("", ipa, ours, &diffs)
	allowed, unexplained := sortDifferences(diffs, allow)
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

// readRecorded decodes the recorded JSON document p (testdata).
func readRecorded(t *testing.T, p string) any {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return v
}

func TestDiffJSON(t *testing.T) {
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
	var diffs []difference
	diffJSON("", ipa, ours, &diffs)
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
	allowed, rest := sortDifferences(diffs, []allowedDifference{{Path: "disks[*].size", Reason: "r"}, {Path: "pci*", Reason: "r"}})
	if len(allowed["disks[*].size"]) != 1 || len(allowed["pci*"]) != 1 || len(rest) != 3 {
		t.Errorf("allowed %v, rest %v", allowed, rest)
	}
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"a*", "abc", true}, {"*c", "abc", true}, {"a*c", "a.b[x=y].c", true}, {"a", "ab", false}, {"a*d", "abc", false}, {"*b*", "abc", true},
	} {
		if got := globMatch(c.p, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

func TestAllowListIsValid(t *testing.T) {
	if _, err := loadAllowList("testdata/ipa13-differences.json"); err != nil {
		t.Fatal(err)
	}
}

func shortJSONIndent(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// TestIPA13RecordedDifferencesAllowed replays TestVMIPASideBySide's
// comparison on the documents its last run stored
// (testdata/ipa13-side-by-side/<firmware>-<agent>.json, copied from the
// *-inspection.json files the test leaves beside the VM logs): every
// difference is in the allow-list. Entries that match no difference of
// that run are logged: some come with the machine's timing (NIC probe
// order, carrier), so a run may not show them.
func TestIPA13RecordedDifferencesAllowed(t *testing.T) {
	allow, err := loadAllowList("testdata/ipa13-differences.json")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, fw := range []string{"bios", "uefi"} {
		dir := "testdata/ipa13-side-by-side/" + fw
		allowed := checkDifferences(t, fw+": ", readRecorded(t, dir+"-ipa.json"), readRecorded(t, dir+"-ours.json"), allow, false)
		for p := range allowed {
			used[p] = true
		}
	}
	for _, a := range allow {
		// The logs tarballs are not recorded (dumpSide), so they cannot differ here.
		if !used[a.Path] && a.Path != "logs" {
			t.Logf("allow-list entry %q matches no difference in the recorded documents", a.Path)
		}
	}
}
