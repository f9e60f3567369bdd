package erase

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/nvme"
)

// FuzzToolOutputs feeds arbitrary bytes as hdparm -I output and as the
// start of an NVMe Identify Controller data structure (zero-padded to its
// 4096 bytes) through the parsers and the decisions built on them.
func FuzzToolOutputs(f *testing.F) {
	f.Add(hdparmInfo(true, false, false, false, true), string(idCtrlPage(23, 4, 0)))
	f.Add(hdparmInfo(false, false, false, false, false), string(idCtrlPage(0, 0, 0)))
	f.Add("", string(idCtrlPage(23, 0, 4)[:600]))
	f.Add("\n/dev/loop0:\n", "identify controller: Invalid argument")
	f.Add("Security: \n\tsupported\n", string(idCtrlPage(2, 0xff, 0xffffffff)))
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
		f.Add(string(b), string(idCtrlPage(23, 4, 3)))
	}
	f.Fuzz(func(t *testing.T, hdparm, idctrl string) {
		lines := ataSecurityLines(hdparm)
		_ = hasLine(lines, "supported")
		page := make([]byte, nvme.IdentifySize)
		copy(page, idctrl)
		if id, err := nvme.ParseController(page); err == nil {
			if mode, err := nvmeFormatMode(id); err == nil && mode != nvme.SESUserData && mode != nvme.SESCrypto {
				t.Fatalf("format mode %d", mode)
			}
			// Express never picks the overwrite sanitize (3).
			if sanact, _, ok := nvmeSanitizeAction(id); ok && sanact != nvme.SanitizeCryptoErase && sanact != nvme.SanitizeBlockErase {
				t.Fatalf("sanitize action %d", sanact)
			}
		}
	})
}
