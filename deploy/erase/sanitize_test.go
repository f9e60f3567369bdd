package erase

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// nvmeIDCtrlSaniJSON is nvmeIDCtrlJSON with a chosen SANICAP.
func nvmeIDCtrlSaniJSON(oacs, fna, sanicap int) string {
	return strings.Replace(nvmeIDCtrlJSON(oacs, fna), `"sanicap" : 1610612739`, fmt.Sprintf(`"sanicap" : %d`, sanicap), 1)
}

// sanitizeLogPage is `nvme sanitize-log --raw-binary` output.
func sanitizeLogPage(sprog, sstat uint16) string {
	b := make([]byte, nvmeSanitizeLogSize)
	binary.LittleEndian.PutUint16(b[0:], sprog)
	binary.LittleEndian.PutUint16(b[2:], sstat)
	binary.LittleEndian.PutUint32(b[4:], nvmeSanactCryptoErase) // SCDW10
	for i := 8; i < 32; i += 4 {
		binary.LittleEndian.PutUint32(b[i:], 0xffffffff) // no time estimates
	}
	return string(b)
}

func TestNVMeSanitizeAction(t *testing.T) {
	for _, c := range []struct {
		sanicap *int
		sanact  int
		method  string
	}{
		{nil, 0, ""},
		{ptr(0), 0, ""},
		{ptr(0x60000003), nvmeSanactCryptoErase, MethodNVMeSanitizeCrypto}, // crypto and block: crypto
		{ptr(0x2), nvmeSanactBlockErase, MethodNVMeSanitizeBlock},
		{ptr(0x6), nvmeSanactBlockErase, MethodNVMeSanitizeBlock},
		{ptr(0x4), 0, ""}, // overwrite only: never for express
	} {
		sanact, method, ok := nvmeSanitizeAction(nvmeIDCtrl{SaniCap: c.sanicap})
		if sanact != c.sanact || method != c.method || ok != (c.sanact != 0) {
			t.Errorf("sanicap %v: %d %q %v", c.sanicap, sanact, method, ok)
		}
	}
}

func ptr(n int) *int { return &n }

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
		idctrl   = "nvme id-ctrl /dev/nvme0n1 -o json"
		crypto   = "nvme sanitize /dev/nvme0n1 -a 4"
		block    = "nvme sanitize /dev/nvme0n1 -a 2"
		log      = "nvme sanitize-log /dev/nvme0n1 --raw-binary"
		format2  = "nvme format /dev/nvme0n1 -s 2 -f"
		doneGDE  = nvmeSanitizeDone | nvmeSanitizeGDE
		progress = nvmeSanitizeInProgress
	)
	page := func(sprog, sstat uint16) fakeReply { return fakeReply{out: sanitizeLogPage(sprog, sstat)} }
	for _, c := range []struct {
		name    string
		replies map[string][]fakeReply
		method  string
		errPart string
		calls   []string
	}{
		{"crypto sanitize, polled to completion", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlJSON(23, 4)}}, crypto: {{}},
			log: {page(0, progress), page(32768, progress), page(0xffff, doneGDE)}},
			MethodNVMeSanitizeCrypto, "", []string{idctrl, crypto, log, log, log}},
		{"block sanitize", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlSaniJSON(23, 0, 2)}}, block: {{}}, log: {page(0xffff, nvmeSanitizeDoneNoDeal|nvmeSanitizeGDE)}},
			MethodNVMeSanitizeBlock, "", []string{idctrl, block, log}},
		{"no sanitize: format", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlSaniJSON(23, 4, 0)}}, format2: {{}}},
			MethodNVMeCrypto, "", []string{idctrl, format2}},
		{"overwrite-only sanitize: format", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlSaniJSON(23, 4, 4)}}, format2: {{}}},
			MethodNVMeCrypto, "", []string{idctrl, format2}},
		{"log shows no sanitize at first", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlJSON(23, 4)}}, crypto: {{}}, log: {page(0, 0), page(0xffff, doneGDE)}},
			MethodNVMeSanitizeCrypto, "", []string{idctrl, crypto, log, log}},
		{"sanitize command fails", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlJSON(23, 4)}}, crypto: {{out: "NVMe status: SANITIZE_IN_PROGRESS: The requested function is prohibited while a sanitize operation is in progress(0x81d)", exit: 1}}},
			"", `failed to start the NVMe sanitize of /dev/nvme0n1: command "nvme sanitize /dev/nvme0n1 -a 4" failed (exit status 1): NVMe status: SANITIZE_IN_PROGRESS`,
			[]string{idctrl, crypto}},
		{"controller reports failure", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlJSON(23, 4)}}, crypto: {{}}, log: {page(100, progress), page(0, nvmeSanitizeFailed)}},
			"", "the controller reports the operation failed (SSTAT=0x0003)", nil},
		{"completed without Global Data Erased", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlJSON(23, 4)}}, crypto: {{}}, log: {page(0xffff, nvmeSanitizeDone)}},
			"", "Global Data Erased clear", nil},
		{"never started", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlJSON(23, 4)}}, crypto: {{}}, log: {page(0, 0)}},
			"", "reports no sanitize operation after the command", nil},
		{"unknown status", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlJSON(23, 4)}}, crypto: {{}}, log: {page(0, 7)}},
			"", "unknown sanitize status (SSTAT=0x0007)", nil},
		{"nvme-cli 2.3: the raw page, then the text report", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlJSON(23, 4)}}, crypto: {{}},
			log: {{out: sanitizeLogPage(0xffff, doneGDE) + "Sanitize Progress                      (SPROG) :  65535\n"}}},
			MethodNVMeSanitizeCrypto, "", nil},
		{"other bytes after the page", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlJSON(23, 4)}}, crypto: {{}}, log: {{out: sanitizeLogPage(0xffff, doneGDE) + "x"}}},
			"", "returned 513 bytes, not the 512-byte Sanitize Status log page", nil},
		{"sanitize-log prints text", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlJSON(23, 4)}}, crypto: {{}}, log: {{out: "Sanitize Progress (SPROG) : 65535\n"}}},
			"", "returned 34 bytes, not the 512-byte Sanitize Status log page", nil},
		{"sanitize-log fails", map[string][]fakeReply{
			idctrl: {{out: nvmeIDCtrlJSON(23, 4)}}, crypto: {{}}, log: {{out: "get-log-page: Invalid argument", exit: 22}}},
			"", `reading the sanitize status of /dev/nvme0n1: command "nvme sanitize-log /dev/nvme0n1 --raw-binary" failed (exit status 22): get-log-page: Invalid argument`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &fakeRunner{replies: c.replies}
			e := &Eraser{Guard: blockdev.NewGuard(nil), Runner: r, Root: fakeNVMeSysfs(t, t.TempDir()), sanitizePoll: time.Millisecond}
			res, err := e.nvmeExpress(context.Background(), dev)
			if c.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), c.errPart) {
					t.Fatalf("error %v, want it to contain %q", err, c.errPart)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if res.Method != c.method {
				t.Errorf("method %q, want %q", res.Method, c.method)
			}
			if c.calls != nil && !reflect.DeepEqual(r.calls, c.calls) {
				t.Errorf("calls\n%q\nwant\n%q", r.calls, c.calls)
			}
		})
	}
}

// Waiting for a sanitize ends with the step's context.
func TestNVMeSanitizeWaitCancelled(t *testing.T) {
	running := make([]fakeReply, 1000)
	for i := range running {
		running[i] = fakeReply{out: sanitizeLogPage(uint16(i), nvmeSanitizeInProgress)}
	}
	r := &fakeRunner{replies: map[string][]fakeReply{
		"nvme id-ctrl /dev/nvme0n1 -o json":           {{out: nvmeIDCtrlJSON(23, 4)}},
		"nvme sanitize /dev/nvme0n1 -a 4":             {{}},
		"nvme sanitize-log /dev/nvme0n1 --raw-binary": running,
	}}
	e := &Eraser{Guard: blockdev.NewGuard(nil), Runner: r, Root: fakeNVMeSysfs(t, t.TempDir()), sanitizePoll: 5 * time.Millisecond}
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
	r := &fakeRunner{replies: map[string][]fakeReply{
		"nvme id-ctrl /dev/nvme0n1 -o json": {{out: nvmeIDCtrlJSON(23, 4)}},
		"nvme sanitize /dev/nvme0n1 -a 4":   {{}},
	}}
	e := &Eraser{Guard: blockdev.NewGuard([]string{"/dev/nvme0n1"}), Runner: r, Root: root}
	_, err := e.nvmeExpress(context.Background(), "/dev/nvme0n1")
	if err == nil || !strings.Contains(err.Error(), "NVMe sanitize of /dev/nvme0n1 would also erase namespace /dev/nvme0n2") {
		t.Fatalf("got %v", err)
	}
	if !reflect.DeepEqual(r.calls, []string{"nvme id-ctrl /dev/nvme0n1 -o json"}) {
		t.Errorf("calls %q", r.calls)
	}
	// Namespaces that cannot be listed: no sanitize either.
	r.calls = nil
	e.Root = t.TempDir()
	_, err = e.nvmeExpress(context.Background(), "/dev/nvme0n1")
	if err == nil || !strings.Contains(err.Error(), "NVMe sanitize of /dev/nvme0n1 applies to every namespace of the NVM subsystem, which cannot be listed") {
		t.Fatalf("unlisted namespaces: %v", err)
	}
	if len(r.calls) != 1 {
		t.Errorf("calls %q", r.calls)
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
	r := &fakeRunner{replies: map[string][]fakeReply{
		"nvme id-ctrl " + dev + " -o json": {{out: nvmeIDCtrlJSON(23, 4)}},
		"nvme sanitize " + dev + " -a 4":   {{out: "NVMe status: ACCESS_DENIED: Access Denied(0x4286)", exit: 1}},
	}}
	e := &Eraser{Guard: blockdev.NewGuard([]string{dev}), Runner: r, Root: dir}
	res, err := e.expressOne(context.Background(), dev, DefaultEraseOptions())
	if err != nil || res.Method != MethodMetadata || !strings.Contains(res.Detail, `NVMe secure erase failed: failed to start the NVMe sanitize of `+dev+`: command "nvme sanitize `+dev+` -a 4" failed (exit status 1): NVMe status: ACCESS_DENIED`) {
		t.Fatalf("express fallback: %+v %v", res, err)
	}
	r = &fakeRunner{replies: map[string][]fakeReply{
		"nvme id-ctrl " + dev + " -o json": {{out: nvmeIDCtrlJSON(23, 4)}},
		"nvme format " + dev + " -s 2 -f":  {{}},
	}}
	e.Runner = r
	if res, err := e.EraseBlockDevice(context.Background(), dev, DefaultEraseOptions()); err != nil || res.Method != MethodNVMeCrypto {
		t.Errorf("erase_devices: %+v %v %q", res, err, r.calls)
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
