package erase

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/ata"
	"github.com/ironic-go/ironic-agent/deploy/ata/atatest"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// qemuIdentify is the IDENTIFY DEVICE data of QEMU's SATA SSD as the
// guest read it through SG_IO (deploy/ata/testdata/qemu).
func qemuIdentify(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "ata", "testdata", "qemu", "lab-sata-ssd.identify"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestATAEraseDecisionTable drives IPA's _ata_erase decisions against a
// simulated drive in each security state: what is sent, in which order,
// and what the step reports.
func TestATAEraseDecisionTable(t *testing.T) {
	const dev = "/dev/sda"
	id := qemuIdentify(t)
	null := `""` // the zero password, as atatest.Drive lists it
	for _, c := range []struct {
		name      string
		drive     atatest.Drive
		supported bool
		method    string
		errPart   string
		ops       []string
	}{
		{"QEMU's disk: no security feature set", atatest.Drive{}, false, "", "",
			[]string{"IDENTIFY"}},
		{"not an ATA device (SAS, virtio behind SCSI)", atatest.Drive{NotATA: true}, false, "", "",
			[]string{"refused opcode 85h"}},
		{"frozen", atatest.Drive{Supported: true, Frozen: true, Enhanced: true}, true, "", "is frozen",
			[]string{"IDENTIFY"}},
		{"enhanced erase, password set first", atatest.Drive{Supported: true, Enhanced: true}, true, MethodATAEnhanced, "",
			[]string{"IDENTIFY", "SET PASSWORD " + null, "ERASE PREPARE", "ERASE UNIT " + null + " enhanced", "IDENTIFY"}},
		{"enabled with the NULL password, no enhanced erase", atatest.Drive{Supported: true, Enabled: true}, true, MethodATA, "",
			[]string{"IDENTIFY", "ERASE PREPARE", "ERASE UNIT " + null, "IDENTIFY"}},
		{"locked with the NULL password: unlocked, then erased", atatest.Drive{Supported: true, Enabled: true, Locked: true, Enhanced: true}, true, MethodATAEnhanced, "",
			[]string{"IDENTIFY", "UNLOCK " + null, "IDENTIFY", "ERASE PREPARE", "ERASE UNIT " + null + " enhanced", "IDENTIFY"}},
		{"locked with someone's password", atatest.Drive{Supported: true, Enabled: true, Locked: true, Enhanced: true, Password: ata.Password{'s', 'e', 'c', 'r', 'e', 't'}},
			true, "", "already has a security password set",
			[]string{"IDENTIFY", "UNLOCK " + null, "IDENTIFY", `UNLOCK "NULL"`, "IDENTIFY"}},
		{"erase aborted: unlocked for the overwrite, error", atatest.Drive{Supported: true, Enhanced: true, FailErase: true}, true, "",
			"erase failed for device /dev/sda: ATA SECURITY ERASE UNIT (F4h) on /dev/sda failed: the drive aborted it",
			[]string{"IDENTIFY", "SET PASSWORD " + null, "ERASE PREPARE", "ERASE UNIT " + null + " enhanced", "IDENTIFY"}},
		{"still enabled after erase", atatest.Drive{Supported: true, Enabled: true, Enhanced: true, StayEnabled: true}, true, "", "security still enabled",
			[]string{"IDENTIFY", "ERASE PREPARE", "ERASE UNIT " + null + " enhanced", "IDENTIFY"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.drive
			d.Identify = id
			e := &Eraser{Guard: blockdev.NewGuard(nil), ataPasser: &d}
			res, supported, err := e.ataErase(context.Background(), dev)
			if supported != c.supported {
				t.Errorf("supported = %v, want %v", supported, c.supported)
			}
			if c.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), c.errPart) {
					t.Fatalf("error %v, want it to contain %q", err, c.errPart)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if res.Method != c.method {
				t.Errorf("method %q, want %q", res.Method, c.method)
			}
			if !reflect.DeepEqual(d.Ops, c.ops) {
				t.Errorf("commands\n%q\nwant\n%q", d.Ops, c.ops)
			}
		})
	}
}

// A drive locked with hdparm before 9.51's literal "NULL" is unlocked by
// the second try; the erase with the zero password then fails as it does
// for IPA with today's hdparm.
func TestATAUnlockLiteralNULL(t *testing.T) {
	d := atatest.Drive{Identify: qemuIdentify(t), Supported: true, Enabled: true, Locked: true, Password: ata.Password{'N', 'U', 'L', 'L'}}
	e := &Eraser{Guard: blockdev.NewGuard(nil), ataPasser: &d}
	_, supported, err := e.ataErase(context.Background(), "/dev/sda")
	if !supported || err == nil || !strings.Contains(err.Error(), "erase failed") || d.Locked {
		t.Fatalf("supported %v, error %v, locked %v; ops %q", supported, err, d.Locked, d.Ops)
	}
}

// erase_devices' fallback rule on the ATA path: an ATA secure erase the
// drive claims but fails (here: frozen, and an aborted ERASE UNIT) stops
// the step unless agent_continue_if_secure_erase_failed; then the device
// is overwritten and the result says why. With ATA secure erase disabled
// no ATA command is sent.
func TestEraseBlockDeviceATAFallback(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "sda")
	for _, c := range []struct {
		name    string
		drive   atatest.Drive
		errPart string
	}{
		{"frozen", atatest.Drive{Supported: true, Frozen: true}, "is frozen"},
		{"erase aborted", atatest.Drive{Supported: true, Enhanced: true, FailErase: true}, "ATA SECURITY ERASE UNIT (F4h) on " + dev + " failed: the drive aborted it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(dev, bytes.Repeat([]byte{0xAB}, 1<<20), 0o600); err != nil {
				t.Fatal(err)
			}
			d := c.drive
			d.Identify = qemuIdentify(t)
			e := &Eraser{Guard: blockdev.NewGuard([]string{dev}), Root: dir, ataPasser: &d}
			o := DefaultEraseOptions()
			_, err := e.EraseBlockDevice(context.Background(), dev, o)
			if err == nil || !strings.Contains(err.Error(), "agent_continue_if_secure_erase_failed") || !strings.Contains(err.Error(), c.errPart) {
				t.Fatalf("without fallback: %v", err)
			}
			if b, _ := os.ReadFile(dev); b[0] != 0xAB {
				t.Error("written without the fallback")
			}
			o.ContinueIfSecureEraseFailed = true
			res, err := e.EraseBlockDevice(context.Background(), dev, o)
			if err != nil || res.Method != MethodOverwrite || !strings.Contains(res.Detail, "secure erase failed") || !strings.Contains(res.Detail, c.errPart) {
				t.Fatalf("with fallback: %+v %v", res, err)
			}
			if b, _ := os.ReadFile(dev); !bytes.Equal(b, make([]byte, len(b))) {
				t.Error("not zeroed after the fallback overwrite")
			}
			d.Ops = nil
			o.EnableATASecureErase = false
			if res, err := e.EraseBlockDevice(context.Background(), dev, o); err != nil || res.Method != MethodOverwrite || len(d.Ops) != 0 {
				t.Errorf("ATA disabled: %+v %v, commands %q", res, err, d.Ops)
			}
		})
	}
}
