package nvme

import (
	"context"
	"os"
	"strings"
	"testing"
)

// qemuRecording is what TestNativeNVMeInQEMU (e2e/hw)
// recorded from QEMU 7.2's emulated controller through the kernel.
const qemuRecording = "testdata/qemu-7.2-nvme.json"

// The commands this package builds are byte for byte those the kernel
// took to QEMU's controller, and its parsers read what came back.
func TestReplayQEMU(t *testing.T) {
	raw, err := os.ReadFile(qemuRecording)
	if err != nil {
		t.Fatal(err)
	}
	xs, err := ParseExchanges(raw)
	if err != nil {
		t.Fatal(err)
	}
	r := &Replay{NSID: 1, Exchanges: xs}
	ctx := context.Background()
	c, err := IdentifyController(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	want := Controller{VendorID: 0x1b36, SerialNumber: "LAB-NVME-0001", ModelNumber: "QEMU NVMe Ctrl", Firmware: "7.2.22",
		OACS: 0x10a, SANICAP: 0, NN: 256, FNA: 0}
	if c != want {
		t.Errorf("controller %+v\nwant %+v", c, want)
	}
	ns, err := IdentifyNamespace(ctx, r, 1)
	if err != nil || ns.Size != 64<<20/512 || ns.BlockSize != 512 || ns.LBAFormat() != 0 || ns.NLBAF != 7 {
		t.Errorf("namespace %+v %v", ns, err)
	}
	// QEMU has no Sanitize: the log page is an invalid field, the
	// command an invalid opcode.
	_, err = SanitizeStatus(ctx, r)
	if s, ok := IsStatus(err); !ok || !s.InvalidField() || !s.DNR() {
		t.Errorf("sanitize log: %v", err)
	}
	err = Sanitize(ctx, r, SanitizeCryptoErase)
	if s, ok := IsStatus(err); !ok || !s.Unsupported() || !strings.Contains(err.Error(), "Invalid Command Opcode") {
		t.Errorf("sanitize: %v", err)
	}
	// QEMU 7.2 ignores SES: a crypto erase it does not report succeeds.
	if err := Format(ctx, r, 1, ns, SESCrypto); err != nil {
		t.Errorf("format SES 2: %v", err)
	}
	if err := Format(ctx, r, 1, ns, SESUserData); err != nil {
		t.Errorf("format SES 1: %v", err)
	}
	if r.Sent != len(xs) {
		t.Errorf("replayed %d of %d exchanges", r.Sent, len(xs))
	}
	// A command that differs from the recording is refused.
	r = &Replay{NSID: 1, Exchanges: xs}
	if _, err := IdentifyNamespace(ctx, r, 1); err == nil || !strings.Contains(err.Error(), "recorded Identify Controller") {
		t.Errorf("out of order: %v", err)
	}
}
