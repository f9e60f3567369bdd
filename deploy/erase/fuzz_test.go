package erase

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/ata"
	"github.com/ironic-go/ironic-agent/deploy/ata/atatest"
)

// FuzzToolOutputs feeds arbitrary bytes as ATA IDENTIFY DEVICE data and
// nvme id-ctrl output through the parsers and the decisions built on them.
func FuzzToolOutputs(f *testing.F) {
	f.Add("", nvmeIDCtrlJSON(23, 4))
	f.Add("", nvmeIDCtrlSaniJSON(23, 0, 4))
	f.Add("\n/dev/loop0:\n", "identify controller: Invalid argument")
	f.Add("Security: \n\tsupported\n", `{"oacs": 2, "fna": null}`)
	// IDENTIFY DEVICE as QEMU's SATA disks answered it through SG_IO, and
	// with security words set.
	recorded, err := filepath.Glob(filepath.Join("..", "ata", "testdata", "qemu", "*.identify"))
	if err != nil || len(recorded) == 0 {
		f.Fatalf("no recorded IDENTIFY data: %v", err)
	}
	for _, p := range recorded {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), nvmeIDCtrlJSON(23, 4))
		f.Add(string(atatest.WithSecurity(b, 0x23, 1, 1)), nvmeIDCtrlJSON(0, 0))
	}
	f.Fuzz(func(t *testing.T, identify, idctrl string) {
		if id, err := ata.ParseIdentify([]byte(identify)); err == nil {
			s := id.Security()
			sim := &atatest.Drive{Identify: []byte(identify), Supported: s.Supported, Enabled: s.Enabled, Locked: s.Locked, Frozen: s.Frozen, Enhanced: s.EnhancedErase}
			e := &Eraser{ataPasser: sim}
			r, supported, err := e.ataErase(context.Background(), "/dev/sdz")
			if !s.Supported && (supported || err != nil) || err == nil && supported && r.Method != MethodATA && r.Method != MethodATAEnhanced {
				t.Fatalf("security %s: supported %v, result %+v, error %v", s, supported, r, err)
			}
		}
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
