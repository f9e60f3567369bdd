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

// fakeRunner replays recorded program outputs. Each command line maps to
// a queue of replies (the same command may answer differently after a
// state change).
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
