package erase

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/ata"
	"github.com/ironic-go/ironic-agent/deploy/ata/atatest"
	"github.com/ironic-go/ironic-agent/deploy/nvme"
)

// FuzzToolOutputs feeds arbitrary bytes as ATA IDENTIFY DEVICE data and as
// the start of an NVMe Identify Controller data structure (zero-padded to
// its 4096 bytes) through the parsers and the decisions built on them.
func FuzzToolOutputs(f *testing.F) {
	f.Add("", string(idCtrlPage(23, 4, 0)))
	f.Add("", string(idCtrlPage(23, 0, 4)[:600]))
	f.Add("\n/dev/loop0:\n", "identify controller: Invalid argument")
	f.Add("Security: \n\tsupported\n", string(idCtrlPage(2, 0xff, 0xffffffff)))
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
		f.Add(string(b), string(idCtrlPage(23, 4, 0)))
		f.Add(string(atatest.WithSecurity(b, 0x23, 1, 1)), string(idCtrlPage(0, 0, 0)))
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
