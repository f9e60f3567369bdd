package erase

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/nvme"
)

func TestNVMeSanitizeAction(t *testing.T) {
	for _, c := range []struct {
		sanicap uint32
		sanact  uint8
		method  string
	}{
		{0, 0, ""},
		{0x60000003, nvme.SanitizeCryptoErase, MethodNVMeSanitizeCrypto}, // crypto and block: crypto
		{0x2, nvme.SanitizeBlockErase, MethodNVMeSanitizeBlock},
		{0x6, nvme.SanitizeBlockErase, MethodNVMeSanitizeBlock},
		{0x4, 0, ""}, // overwrite only: never for express
	} {
		sanact, method, ok := nvmeSanitizeAction(nvme.Controller{SANICAP: c.sanicap})
		if sanact != c.sanact || method != c.method || ok != (c.sanact != 0) {
			t.Errorf("sanicap %#x: %d %q %v", c.sanicap, sanact, method, ok)
		}
	}
}

// fakeNVMeSysfs makes the sysfs entries that list the namespaces of
// nvme0n1's controller below root.
func fakeNVMeSysfs(t *testing.T, root string, namespaces ...string) string {
	t.Helper()
	for _, ns := range append([]string{"nvme0n1"}, namespaces...) {
		if err := os.MkdirAll(filepath.Join(root, "sys/class/block/nvme0n1/device", ns), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestNVMeExpressDecisionTable(t *testing.T) {
	const dev = "/dev/nvme0n1"
	const (
		doneGDE  = nvme.SanitizeDone | nvme.SSTATGlobalDataErased
		progress = nvme.SanitizeInProgress
	)
	page := func(sprog, sstat uint16) nvmeReply { return nvmeReply{data: sanitizeLogPage(sprog, sstat)} }
	ctrl := func(oacs uint16, fna uint8, sanicap uint32) []nvmeReply {
		return []nvmeReply{{data: idCtrlPage(oacs, fna, sanicap)}}
	}
	for _, c := range []struct {
		name    string
		replies map[string][]nvmeReply
		method  string
		errPart string
		calls   []string
	}{
		{"crypto sanitize, polled to completion", map[string][]nvmeReply{
			cmdIDCtrl: ctrl(23, 4, 0x60000003), cmdSanCrypto: {{}},
			cmdSanLog: {page(0, progress), page(32768, progress), page(0xffff, doneGDE)}},
			MethodNVMeSanitizeCrypto, "", []string{cmdIDCtrl, cmdSanCrypto, cmdSanLog, cmdSanLog, cmdSanLog}},
		{"block sanitize", map[string][]nvmeReply{
			cmdIDCtrl: ctrl(23, 0, 2), cmdSanBlock: {{}}, cmdSanLog: {page(0xffff, nvme.SanitizeDoneDeallocated|nvme.SSTATGlobalDataErased)}},
			MethodNVMeSanitizeBlock, "", []string{cmdIDCtrl, cmdSanBlock, cmdSanLog}},
		{"no sanitize: format", formatReplies(23, 4, 0, cmdFormat2, 0),
			MethodNVMeCrypto, "", []string{cmdIDCtrl, cmdIDNS, cmdFormat2}},
		{"overwrite-only sanitize: format", formatReplies(23, 4, 4, cmdFormat2, 0),
			MethodNVMeCrypto, "", []string{cmdIDCtrl, cmdIDNS, cmdFormat2}},
		{"log shows no sanitize at first", map[string][]nvmeReply{
			cmdIDCtrl: ctrl(23, 4, 1), cmdSanCrypto: {{}}, cmdSanLog: {page(0, 0), page(0xffff, doneGDE)}},
			MethodNVMeSanitizeCrypto, "", []string{cmdIDCtrl, cmdSanCrypto, cmdSanLog, cmdSanLog}},
		{"sanitize command fails", map[string][]nvmeReply{
			cmdIDCtrl: ctrl(23, 4, 1), cmdSanCrypto: {{status: statusSanitizeBusy}}},
			"", "failed to start the NVMe sanitize of /dev/nvme0n1: Sanitize (SANACT 4): NVMe status 0x001d (type 0, code 0x1d: Sanitize In Progress)",
			[]string{cmdIDCtrl, cmdSanCrypto}},
		{"controller reports failure", map[string][]nvmeReply{
			cmdIDCtrl: ctrl(23, 4, 1), cmdSanCrypto: {{}}, cmdSanLog: {page(100, progress), page(0, nvme.SanitizeFailed)}},
			"", "the controller reports the operation failed (SSTAT=0x0003)", nil},
		{"completed without Global Data Erased", map[string][]nvmeReply{
			cmdIDCtrl: ctrl(23, 4, 1), cmdSanCrypto: {{}}, cmdSanLog: {page(0xffff, nvme.SanitizeDone)}},
			"", "Global Data Erased clear", nil},
		{"never started", map[string][]nvmeReply{
			cmdIDCtrl: ctrl(23, 4, 1), cmdSanCrypto: {{}}, cmdSanLog: {page(0, 0)}},
			"", "reports no sanitize operation after the command", nil},
		{"unknown status", map[string][]nvmeReply{
			cmdIDCtrl: ctrl(23, 4, 1), cmdSanCrypto: {{}}, cmdSanLog: {page(0, 7)}},
			"", "unknown sanitize status (SSTAT=0x0007)", nil},
		{"sanitize log unsupported", map[string][]nvmeReply{
			cmdIDCtrl: ctrl(23, 4, 1), cmdSanCrypto: {{}}, cmdSanLog: {{status: 0x4109}}},
			"", "reading the sanitize status of /dev/nvme0n1: Get Log Page (LID 0x81): NVMe status 0x4109 (type 1, code 0x09: Invalid Log Page)", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeNVMe{replies: c.replies}
			e := &Eraser{Guard: blockdev.NewGuard(nil), Root: fakeNVMeSysfs(t, t.TempDir()), nvmeOpen: f.open, sanitizePoll: time.Millisecond}
			res, err := e.nvmeExpress(context.Background(), dev)
			checkNVMeOutcome(t, res, err, c.method, c.errPart, f, c.calls)
		})
	}
}

// Waiting for a sanitize ends with the step's context.
func TestNVMeSanitizeWaitCancelled(t *testing.T) {
	running := make([]nvmeReply, 1000)
	for i := range running {
		running[i] = nvmeReply{data: sanitizeLogPage(uint16(i), nvme.SanitizeInProgress)}
	}
	f := &fakeNVMe{replies: map[string][]nvmeReply{cmdIDCtrl: {{data: idCtrlPage(23, 4, 1)}}, cmdSanCrypto: {{}}, cmdSanLog: running}}
	e := &Eraser{Guard: blockdev.NewGuard(nil), Root: fakeNVMeSysfs(t, t.TempDir()), nvmeOpen: f.open, sanitizePoll: 5 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := e.nvmeExpress(ctx, "/dev/nvme0n1")
	if err == nil || !strings.Contains(err.Error(), "waiting for the NVMe sanitize of /dev/nvme0n1") {
		t.Fatalf("got %v", err)
	}
}

// A sanitize erases every namespace of the subsystem whatever fna says:
// it must not run when another namespace is outside the guard.
func TestNVMeSanitizeAllNamespacesGuarded(t *testing.T) {
	root := fakeNVMeSysfs(t, t.TempDir(), "nvme0n2")
	replies := func() *fakeNVMe {
		return &fakeNVMe{replies: map[string][]nvmeReply{cmdIDCtrl: {{data: idCtrlPage(23, 4, 1)}}, cmdSanCrypto: {{}}}}
	}
	f := replies()
	e := &Eraser{Guard: blockdev.NewGuard([]string{"/dev/nvme0n1"}), Root: root, nvmeOpen: f.open}
	_, err := e.nvmeExpress(context.Background(), "/dev/nvme0n1")
	if err == nil || !strings.Contains(err.Error(), "NVMe sanitize of /dev/nvme0n1 would also erase namespace /dev/nvme0n2") {
		t.Fatalf("got %v", err)
	}
	if !reflect.DeepEqual(f.calls, []string{cmdIDCtrl}) {
		t.Errorf("calls %q", f.calls)
	}
	// Namespaces that cannot be listed: no sanitize either.
	f = replies()
	e.nvmeOpen = f.open
	e.Root = t.TempDir()
	_, err = e.nvmeExpress(context.Background(), "/dev/nvme0n1")
	if err == nil || !strings.Contains(err.Error(), "NVMe sanitize of /dev/nvme0n1 applies to every namespace of the NVM subsystem, which cannot be listed") {
		t.Fatalf("unlisted namespaces: %v", err)
	}
	if len(f.calls) != 1 {
		t.Errorf("calls %q", f.calls)
	}
}

// erase_devices_express: a sanitize the drive claims but fails falls back
// to the metadata wipe as IPA's express erase does, and the result says
// why; erase_devices still formats as IPA does.
func TestEraseExpressSanitizeFallback(t *testing.T) {
	dir := fakeNVMeSysfs(t, t.TempDir())
	dev := filepath.Join(dir, "nvme0n1")
	if err := os.WriteFile(dev, []byte(strings.Repeat("\xab", 1<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fakeNVMe{replies: map[string][]nvmeReply{cmdIDCtrl: {{data: idCtrlPage(23, 4, 1)}}, cmdSanCrypto: {{status: statusAccessDenied}}}}
	e := &Eraser{Guard: blockdev.NewGuard([]string{dev}), Root: dir, nvmeOpen: f.open}
	res, err := e.expressOne(context.Background(), dev, DefaultEraseOptions())
	if err != nil || res.Method != MethodMetadata || !strings.Contains(res.Detail, "NVMe secure erase failed: failed to start the NVMe sanitize of "+dev+": Sanitize (SANACT 4): NVMe status 0x4286 (type 2, code 0x86: Access Denied)") {
		t.Fatalf("express fallback: %+v %v", res, err)
	}
	f = &fakeNVMe{replies: formatReplies(23, 4, 1, cmdFormat2, 0)}
	e.nvmeOpen = f.open
	if res, err := e.EraseBlockDevice(context.Background(), dev, DefaultEraseOptions()); err != nil || res.Method != MethodNVMeCrypto {
		t.Errorf("erase_devices: %+v %v %q", res, err, f.calls)
	}
}

// The namespaces a sanitize erases are the whole NVM subsystem's: those of
// other controllers of the subsystem, and a multipath head's siblings.
func TestNVMeSubsystemNamespaces(t *testing.T) {
	mk := func(root string, dirs ...string) {
		for _, d := range dirs {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	link := func(target, name string) {
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	// Two controllers of one subsystem, no multipath.
	root := t.TempDir()
	mk(root, "sys/devices/pci0/nvme/nvme0/nvme0n1", "sys/devices/pci1/nvme/nvme1/nvme1n1",
		"sys/class/block", "sys/class/nvme-subsystem/nvme-subsys0")
	link(filepath.Join(root, "sys/devices/pci0/nvme/nvme0/nvme0n1"), filepath.Join(root, "sys/class/block/nvme0n1"))
	link(filepath.Join(root, "sys/devices/pci0/nvme/nvme0"), filepath.Join(root, "sys/devices/pci0/nvme/nvme0/nvme0n1/device"))
	link(filepath.Join(root, "sys/devices/pci0/nvme/nvme0"), filepath.Join(root, "sys/class/nvme-subsystem/nvme-subsys0/nvme0"))
	link(filepath.Join(root, "sys/devices/pci1/nvme/nvme1"), filepath.Join(root, "sys/class/nvme-subsystem/nvme-subsys0/nvme1"))
	e := &Eraser{Guard: blockdev.NewGuard([]string{"/dev/nvme0n1"}), Root: root}
	got, err := e.nvmeSubsystemNamespaces("/dev/nvme0n1")
	if err != nil || !reflect.DeepEqual(got, []string{"/dev/nvme1n1"}) {
		t.Errorf("two controllers: %v %v", got, err)
	}
	if err := e.guardSiblingNamespaces("/dev/nvme0n1", "NVMe sanitize of /dev/nvme0n1", true); err == nil ||
		!strings.Contains(err.Error(), "would also erase namespace /dev/nvme1n1") {
		t.Errorf("guard: %v", err)
	}
	// The controller-level listing (format) does not see nvme1n1.
	if got, err := e.nvmeSiblingNamespaces("/dev/nvme0n1"); err != nil || len(got) != 0 {
		t.Errorf("controller siblings: %v %v", got, err)
	}

	// Native multipath: the head's device is the subsystem, which holds
	// the heads; the controller holds the paths.
	root = t.TempDir()
	mk(root, "sys/devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1", "sys/devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n2",
		"sys/devices/pci0/nvme/nvme0/nvme0c0n1", "sys/devices/pci0/nvme/nvme0/nvme0c0n3", "sys/class/block")
	sub := filepath.Join(root, "sys/devices/virtual/nvme-subsystem/nvme-subsys0")
	link(filepath.Join(sub, "nvme0n1"), filepath.Join(root, "sys/class/block/nvme0n1"))
	link(sub, filepath.Join(sub, "nvme0n1/device"))
	link(filepath.Join(root, "sys/devices/pci0/nvme/nvme0"), filepath.Join(sub, "nvme0"))
	e.Root = root
	got, err = e.nvmeSubsystemNamespaces("/dev/nvme0n1")
	if err != nil || !reflect.DeepEqual(got, []string{"/dev/nvme0n2", "/dev/nvme0n3"}) {
		t.Errorf("multipath: %v %v", got, err)
	}
}
