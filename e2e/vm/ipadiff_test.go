package vm

import (
	"encoding/json"
	"fmt"
	"os"
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

// TestIPA13RecordedDifferencesAllowed replays TestVMIPASideBySide's
// comparison on the documents its last run stored
// (testdata/ipa13-side-by-side/<firmware>-<agent>.json, copied from the
// *-inspection.json files the test leaves beside the VM logs): every
// difference is in the allow-list. Entries that match no difference of
// that run are logged: some come with the machine's timing (NIC probe
// order, carrier), so a run may not show them.
func TestIPA13RecordedDifferencesAllowed(t *testing.T) {
	allow, err := ipadiff.LoadAllowList("testdata/ipa13-differences.json")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, fw := range []string{"bios", "uefi"} {
		dir := "testdata/ipa13-side-by-side/" + fw
		allowed := ipadiff.Check(t, fw+": ", readRecorded(t, dir+"-ipa.json"), readRecorded(t, dir+"-ours.json"), allow, false)
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
