package erase

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// fakeRunner replays recorded outputs of hdparm. Each
// command line maps to a queue of replies (the same command may answer
// differently after a state change, e.g. hdparm -I after an erase).
type fakeRunner struct {
	replies map[string][]fakeReply
	calls   []string
}

type fakeReply struct {
	out  string
	exit int
}

func (f *fakeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	f.calls = append(f.calls, line)
	q := f.replies[line]
	if len(q) == 0 {
		return nil, &blockdev.CommandError{Args: append([]string{name}, args...), ExitCode: 127, Stderr: "fake: no reply recorded"}
	}
	r := q[0]
	if len(q) > 1 {
		f.replies[line] = q[1:]
	}
	if r.exit != 0 {
		return nil, &blockdev.CommandError{Args: append([]string{name}, args...), ExitCode: r.exit, Stderr: r.out}
	}
	return []byte(r.out), nil
}

// hdparmInfo renders `hdparm -I` output in hdparm's layout with the given
// security state (one flag per line of the Security section).
func hdparmInfo(supported, enabled, locked, frozen, enhanced bool) string {
	not := func(b bool, s string) string {
		if b {
			return "\t" + s
		}
		return "not\t" + s
	}
	return "\n/dev/sda:\n\nATA device, with non-removable media\n" +
		"\tModel Number:       TEST SSD\n\tSerial Number:      S123\n" +
		"Commands/features: \n\tEnabled\tSupported:\n\t   *\tSMART feature set\n\t    \tSecurity Mode feature set\n" +
		"Security: \n" +
		"\tMaster password revision code = 65534\n" +
		"\t" + not(supported, "supported") + "\n" +
		"\t" + not(enabled, "enabled") + "\n" +
		"\t" + not(locked, "locked") + "\n" +
		"\t" + not(frozen, "frozen") + "\n" +
		"\tnot\texpired: security count\n" +
		"\t" + not(enhanced, "supported: enhanced erase") + "\n" +
		"\t2min for SECURITY ERASE UNIT. 2min for ENHANCED SECURITY ERASE UNIT.\n" +
		"Checksum: correct\n"
}

func TestATASecurityLines(t *testing.T) {
	got := ataSecurityLines(hdparmInfo(true, false, false, false, true))
	want := []string{"Master password revision code = 65534", "supported", "not enabled", "not locked",
		"not frozen", "not expired: security count", "supported: enhanced erase",
		"2min for SECURITY ERASE UNIT. 2min for ENHANCED SECURITY ERASE UNIT."}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if ataSecurityLines("\n/dev/loop0:\n") != nil {
		t.Error("security lines from output without a Security section")
	}
}

func TestATAEraseDecisionTable(t *testing.T) {
	const dev = "/dev/sda"
	info := func(s, e, l, f, enh bool) fakeReply { return fakeReply{out: hdparmInfo(s, e, l, f, enh)} }
	for _, c := range []struct {
		name      string
		replies   map[string][]fakeReply
		supported bool
		method    string
		errPart   string
		calls     []string
	}{
		{"not supported", map[string][]fakeReply{"hdparm -I /dev/sda": {info(false, false, false, false, false)}},
			false, "", "", []string{"hdparm -I /dev/sda"}},
		{"no security section (virtio, loop)", map[string][]fakeReply{"hdparm -I /dev/sda": {{out: "\n/dev/sda:\n"}}},
			false, "", "", []string{"hdparm -I /dev/sda"}},
		{"frozen", map[string][]fakeReply{"hdparm -I /dev/sda": {info(true, false, false, true, true)}},
			true, "", "is frozen", []string{"hdparm -I /dev/sda"}},
		{"enhanced erase", map[string][]fakeReply{
			"hdparm -I /dev/sda": {info(true, false, false, false, true), info(true, false, false, false, true)},
			"hdparm --user-master u --security-set-pass NULL /dev/sda":       {{}},
			"hdparm --user-master u --security-erase-enhanced NULL /dev/sda": {{}},
		}, true, MethodATAEnhanced, "", []string{
			"hdparm -I /dev/sda",
			"hdparm --user-master u --security-set-pass NULL /dev/sda",
			"hdparm --user-master u --security-erase-enhanced NULL /dev/sda",
			"hdparm -I /dev/sda"}},
		{"plain erase, password already set", map[string][]fakeReply{
			"hdparm -I /dev/sda": {info(true, true, false, false, false), info(true, false, false, false, false)},
			"hdparm --user-master u --security-erase NULL /dev/sda": {{}},
		}, true, MethodATA, "", []string{
			"hdparm -I /dev/sda",
			"hdparm --user-master u --security-erase NULL /dev/sda",
			"hdparm -I /dev/sda"}},
		{"locked, unlock with NULL works", map[string][]fakeReply{
			"hdparm -I /dev/sda": {info(true, true, true, false, true), info(true, true, false, false, true), info(true, false, false, false, true)},
			"hdparm --user-master u --security-unlock NULL /dev/sda":         {{}},
			"hdparm --user-master u --security-erase-enhanced NULL /dev/sda": {{}},
		}, true, MethodATAEnhanced, "", []string{
			"hdparm -I /dev/sda",
			"hdparm --user-master u --security-unlock NULL /dev/sda",
			"hdparm -I /dev/sda",
			"hdparm --user-master u --security-erase-enhanced NULL /dev/sda",
			"hdparm -I /dev/sda"}},
		{"locked, unlock fails", map[string][]fakeReply{
			"hdparm -I /dev/sda": {info(true, true, true, false, true)},
			"hdparm --user-master u --security-unlock NULL /dev/sda": {{out: "SG_IO: bad/missing sense data", exit: 5}},
			"hdparm --user-master u --security-unlock  /dev/sda":     {{out: "SG_IO: bad/missing sense data", exit: 5}},
		}, true, "", "already has a security password set", nil},
		{"erase command fails", map[string][]fakeReply{
			"hdparm -I /dev/sda": {info(true, false, false, false, true), info(true, true, false, false, true), info(true, true, false, false, true)},
			"hdparm --user-master u --security-set-pass NULL /dev/sda":       {{}},
			"hdparm --user-master u --security-erase-enhanced NULL /dev/sda": {{out: "SECURITY_ERASE: Input/output error", exit: 5}},
			"hdparm --user-master u --security-unlock NULL /dev/sda":         {{}},
			"hdparm --user-master u --security-unlock  /dev/sda":             {{}},
		}, true, "", `"hdparm --user-master u --security-erase-enhanced NULL /dev/sda" failed (exit status 5): SECURITY_ERASE: Input/output error`, nil},
		{"still enabled after erase", map[string][]fakeReply{
			"hdparm -I /dev/sda": {info(true, true, false, false, true), info(true, true, false, false, true)},
			"hdparm --user-master u --security-erase-enhanced NULL /dev/sda": {{}},
		}, true, "", "security still enabled", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &fakeRunner{replies: c.replies}
			e := &Eraser{Guard: blockdev.NewGuard(nil), Runner: r}
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
			if c.calls != nil && !reflect.DeepEqual(r.calls, c.calls) {
				t.Errorf("calls\n%q\nwant\n%q", r.calls, c.calls)
			}
		})
	}
}

func TestEraseOptionsFromNode(t *testing.T) {
	o, err := EraseOptionsFromNode(map[string]any{})
	if err != nil || !reflect.DeepEqual(o, DefaultEraseOptions()) {
		t.Fatalf("defaults: %+v %v", o, err)
	}
	o, err = EraseOptionsFromNode(map[string]any{
		"driver_internal_info": map[string]any{
			"agent_erase_devices_iterations":     float64(3),
			"agent_erase_devices_zeroize":        false,
			"agent_continue_if_ata_erase_failed": true,
			"agent_enable_ata_secure_erase":      false,
			"agent_enable_nvme_secure_erase":     "false",
			"agent_erase_skip_read_only":         true,
			"disk_erasure_concurrency":           float64(4),
			"wipe_special_filesystems":           false,
			"guard_special_filesystems":          false,
		},
		"properties": map[string]any{"skip_block_devices": []any{map[string]any{"name": "/dev/sda"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// guard_special_filesystems is the agent's setting, never the node's.
	want := EraseOptions{Iterations: 3, ContinueIfSecureEraseFailed: true, SkipReadOnly: true, Concurrency: 4,
		GuardSpecialFilesystems: true, SkipBlockDevices: []map[string]any{{"name": "/dev/sda"}}}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("got %+v\nwant %+v", o, want)
	}
	// The new name wins over the legacy one.
	o, _ = EraseOptionsFromNode(map[string]any{"driver_internal_info": map[string]any{
		"agent_continue_if_secure_erase_failed": false, "agent_continue_if_ata_erase_failed": true}})
	if o.ContinueIfSecureEraseFailed {
		t.Error("legacy option overrode the new one")
	}
	_, err = EraseOptionsFromNode(map[string]any{"driver_internal_info": map[string]any{"agent_erase_devices_iterations": "many"}})
	if err == nil || !strings.Contains(err.Error(), "agent_erase_devices_iterations") {
		t.Errorf("bad iterations: %v", err)
	}
}

func TestErasePstore(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "pstore dir")
	if err := os.MkdirAll(filepath.Join(store, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"dmesg-efi-1", "sub/x"} {
		if err := os.WriteFile(filepath.Join(store, f), []byte("oops"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	mounts := "sysfs /sys sysfs rw 0 0\npstore " + strings.ReplaceAll(store, " ", `\040`) + " pstore rw,nosuid 0 0\n"
	if err := os.WriteFile(filepath.Join(dir, "proc/mounts"), []byte(mounts), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := ErasePstore(context.Background(), dir)
	if err != nil || len(removed) != 2 {
		t.Fatalf("removed %v, %v", removed, err)
	}
	if ents, _ := os.ReadDir(store); len(ents) != 0 {
		t.Errorf("left %v", ents)
	}
	// No pstore mounted: nothing to do.
	if err := os.WriteFile(filepath.Join(dir, "proc/mounts"), []byte("sysfs /sys sysfs rw 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if removed, err := ErasePstore(context.Background(), dir); err != nil || removed != nil {
		t.Errorf("without pstore: %v %v", removed, err)
	}
}

// erase_devices' fallback rule: a secure erase the drive claims but fails
// stops the step unless agent_continue_if_secure_erase_failed; then the
// device is overwritten and the result says why.
func TestEraseBlockDeviceSecureEraseFallback(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "nvme0n1")
	if err := os.WriteFile(dev, bytes.Repeat([]byte{0xAB}, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	replies := func() *fakeNVMe {
		return &fakeNVMe{replies: formatReplies(23, 4, 0, cmdFormat2, statusAccessDenied)}
	}
	e := &Eraser{Guard: blockdev.NewGuard([]string{dev}), Root: dir, nvmeOpen: replies().open}
	o := DefaultEraseOptions()
	_, err := e.EraseBlockDevice(context.Background(), dev, o)
	if err == nil || !strings.Contains(err.Error(), "agent_continue_if_secure_erase_failed") ||
		!strings.Contains(err.Error(), "failed to nvme format device "+dev+": Format NVM (nsid 1, SES 2): NVMe status 0x4286 (type 2, code 0x86: Access Denied)") {
		t.Fatalf("without fallback: %v", err)
	}
	o.ContinueIfSecureEraseFailed = true
	e.nvmeOpen = replies().open
	res, err := e.EraseBlockDevice(context.Background(), dev, o)
	if err != nil || res.Method != MethodOverwrite || !strings.Contains(res.Detail, "secure erase failed") {
		t.Fatalf("with fallback: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(dev); !bytes.Equal(b, make([]byte, len(b))) {
		t.Error("not zeroed after the fallback overwrite")
	}
	// NVMe secure erase disabled: straight to the overwrite, no admin
	// command is sent.
	f := replies()
	e.nvmeOpen = f.open
	o.EnableNVMeSecureErase = false
	if res, err := e.EraseBlockDevice(context.Background(), dev, o); err != nil || res.Method != MethodOverwrite || len(f.calls) != 0 {
		t.Errorf("disabled: %+v %v %q", res, err, f.calls)
	}
}
