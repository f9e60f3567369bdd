package erase

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestATASecurityRecorded feeds the `hdparm -I` outputs of testdata/hdparm
// (recorded with Debian's hdparm 9.65 from QEMU's emulated SATA disks; see
// its README) to the parser and checks that ATA erase would see each
// drive's security state as the drive reports it: the lines ataErase tests
// with hasLine.
func TestATASecurityRecorded(t *testing.T) {
	// What the drive reports in each file, from IDENTIFY word 128 (written
	// by internal/vmtest/recordhdparm), not from the parser.
	type security struct{ supported, enabled, locked, frozen, expired, enhanced bool }
	states := map[string]security{
		"security-not-supported":               {},
		"security-supported":                   {supported: true, enhanced: true},
		"security-supported-no-enhanced-erase": {supported: true},
		"security-frozen":                      {supported: true, frozen: true, enhanced: true},
		"security-enabled":                     {supported: true, enabled: true, enhanced: true},
		"security-locked":                      {supported: true, enabled: true, locked: true, enhanced: true},
		"security-locked-expired":              {supported: true, enabled: true, locked: true, expired: true, enhanced: true},
	}
	drives := []string{"lab-sata-hdd", "lab-sata-ssd"}

	files, err := filepath.Glob(filepath.Join("testdata", "hdparm", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, drive := range drives {
		for name, want := range states {
			path := filepath.Join("testdata", "hdparm", drive+"-"+name+".txt")
			t.Run(drive+"-"+name, func(t *testing.T) {
				out, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				lines := ataSecurityLines(string(out))
				if !want.supported {
					// hdparm prints no Security section for such a drive.
					if lines != nil || hasLine(lines, "supported") {
						t.Errorf("security lines %q, want none", lines)
					}
					return
				}
				for _, c := range []struct {
					line string
					want bool
				}{
					{"supported", true},
					{"not enabled", !want.enabled},
					{"enabled", want.enabled},
					{"not locked", !want.locked},
					{"locked", want.locked},
					{"not frozen", !want.frozen},
					{"frozen", want.frozen},
					{"not expired: security count", !want.expired},
					{"expired: security count", want.expired},
					{"not supported: enhanced erase", !want.enhanced},
					{"supported: enhanced erase", want.enhanced},
				} {
					if got := hasLine(lines, c.line); got != c.want {
						t.Errorf("hasLine(%q) = %v, want %v (security lines %q)", c.line, got, c.want, lines)
					}
				}
			})
			checked++
			if i := slices.Index(files, path); i >= 0 {
				files = slices.Delete(files, i, i+1)
			}
		}
	}
	if len(files) > 0 {
		t.Errorf("recorded outputs without an expected state: %v", files)
	}
	if checked != len(drives)*len(states) {
		t.Errorf("checked %d outputs, want %d", checked, len(drives)*len(states))
	}
}
