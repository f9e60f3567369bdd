package erase

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzToolOutputs feeds arbitrary bytes as hdparm -I and nvme id-ctrl
// output through the parsers and the decisions built on them.
func FuzzToolOutputs(f *testing.F) {
	f.Add(hdparmInfo(true, false, false, false, true), nvmeIDCtrlJSON(23, 4))
	f.Add(hdparmInfo(false, false, false, false, false), nvmeIDCtrlJSON(0, 0))
	f.Add("", nvmeIDCtrlSaniJSON(23, 0, 4))
	f.Add("\n/dev/loop0:\n", "identify controller: Invalid argument")
	f.Add("Security: \n\tsupported\n", `{"oacs": 2, "fna": null}`)
	// The hdparm -I outputs recorded from QEMU's SATA disks (testdata/hdparm).
	recorded, err := filepath.Glob(filepath.Join("testdata", "hdparm", "*.txt"))
	if err != nil || len(recorded) == 0 {
		f.Fatalf("no recorded hdparm outputs: %v", err)
	}
	for _, p := range recorded {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), nvmeIDCtrlJSON(23, 4))
	}
	f.Fuzz(func(t *testing.T, hdparm, idctrl string) {
		lines := ataSecurityLines(hdparm)
		_ = hasLine(lines, "supported")
		if id, err := parseNVMeIDCtrl([]byte(idctrl)); err == nil {
			if mode, err := nvmeFormatMode(id); err == nil && mode != 1 && mode != 2 {
				t.Fatalf("format mode %d", mode)
			}
			// Express never picks the overwrite sanitize (3).
			if sanact, _, ok := nvmeSanitizeAction(id); ok && sanact != nvmeSanactCryptoErase && sanact != nvmeSanactBlockErase {
				t.Fatalf("sanitize action %d", sanact)
			}
		}
	})
}

// FuzzNVMeSanitizeLog feeds arbitrary bytes as `nvme sanitize-log
// --raw-binary` output: only the 512-byte page (with nvme-cli 2.3's text
// after it) parses.
func FuzzNVMeSanitizeLog(f *testing.F) {
	f.Add([]byte(sanitizeLogPage(0xffff, nvmeSanitizeDone|nvmeSanitizeGDE)))
	f.Add([]byte(sanitizeLogPage(1234, nvmeSanitizeInProgress)))
	f.Add([]byte("Sanitize Progress (SPROG) : 65535\n"))
	f.Add([]byte{})
	f.Add([]byte(sanitizeLogPage(0xffff, nvmeSanitizeDone|nvmeSanitizeGDE) + "Sanitize Progress  (SPROG) :  65535\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parseNVMeSanitizeLog(b)
		if err != nil {
			return
		}
		if len(b) < nvmeSanitizeLogSize || l.state() < 0 || l.state() > 7 {
			t.Fatalf("accepted %d bytes, state %d", len(b), l.state())
		}
	})
}
