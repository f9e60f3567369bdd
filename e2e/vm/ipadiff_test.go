package vm

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/ipa/ipadiff"
)

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

func TestAllowListIsValid(t *testing.T) {
	for _, f := range []string{"testdata/ipa13-differences.json", "testdata/ipa13-server-differences.json"} {
		if _, err := ipadiff.LoadAllowList(f); err != nil {
			t.Fatal(err)
		}
	}
}

func shortJSONIndent(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// recordedSideBySide is one recorded comparison of
// testdata/ipa13-side-by-side (<name>-ipa.json, <name>-ours.json) and the
// allow-lists its live test uses.
type recordedSideBySide struct {
	name       string
	allowLists []string
}

var recordedSideBySides = []recordedSideBySide{
	// TestVMIPASideBySide's.
	{"bios", []string{"testdata/ipa13-differences.json"}},
	{"uefi", []string{"testdata/ipa13-differences.json"}},
	// TestVMIPASideBySideServer's.
	{"server", []string{"testdata/ipa13-differences.json", "testdata/ipa13-server-differences.json"}},
}

// TestIPA13RecordedDifferencesAllowed replays TestVMIPASideBySide's and
// TestVMIPASideBySideServer's comparisons on the documents their last
// runs stored (testdata/ipa13-side-by-side/<name>-<agent>.json, copied
// from the *-inspection.json files the tests leave beside the VM logs):
// every difference is in the allow-lists, and the NICs have the same
// predictable names in both documents. Entries that match no difference
// of those runs are logged: some come with the machine's timing (carrier,
// addresses), so a run may not show them.
func TestIPA13RecordedDifferencesAllowed(t *testing.T) {
	used := map[string]map[string]bool{}
	for _, r := range recordedSideBySides {
		var allow []ipadiff.Allowed
		for _, f := range r.allowLists {
			a, err := ipadiff.LoadAllowList(f)
			if err != nil {
				t.Fatal(err)
			}
			allow = append(allow, a...)
			if used[f] == nil {
				used[f] = map[string]bool{}
			}
		}
		dir := "testdata/ipa13-side-by-side/" + r.name
		ipaDoc, oursDoc := readRecorded(t, dir+"-ipa.json"), readRecorded(t, dir+"-ours.json")
		allowed := compareSides(t, r.name+": ", ipaDoc.(map[string]any), oursDoc.(map[string]any), allow, false)
		for _, f := range r.allowLists {
			a, _ := ipadiff.LoadAllowList(f)
			for _, e := range a {
				if len(allowed[e.Path]) > 0 {
					used[f][e.Path] = true
				}
			}
		}
	}
	for _, f := range slices.Sorted(maps.Keys(used)) {
		a, _ := ipadiff.LoadAllowList(f)
		for _, e := range a {
			// The logs tarballs are not recorded (dumpSide), so they cannot differ here.
			if !used[f][e.Path] && e.Path != "logs" {
				t.Logf("%s: entry %q matches no difference in the recorded documents", f, e.Path)
			}
		}
	}
}
