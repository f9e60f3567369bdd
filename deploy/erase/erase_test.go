package erase

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// fakeRunner replays recorded outputs of nvme-cli. Each command line maps
// to a queue of replies (the same command may answer differently after a
// state change, e.g. the sanitize log while a sanitize runs).
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

// nvmeIDCtrlJSON is `nvme id-ctrl -o json` output trimmed to a few fields
// around the ones the erase reads, in nvme-cli's layout.
func nvmeIDCtrlJSON(oacs, fna int) string {
	return fmt.Sprintf(`{
  "vid" : 5559,
  "sn" : "1951B3444502        ",
  "mn" : "TEST NVME 256G                          ",
  "oacs" : %d,
  "sanicap" : 1610612739,
  "nn" : 1,
  "fna" : %d,
  "vwc" : 7
}`, oacs, fna)
}

func TestNVMeEraseDecisionTable(t *testing.T) {
	const dev = "/dev/nvme0n1"
	for _, c := range []struct {
		name    string
		idctrl  fakeReply
		format  map[string][]fakeReply
		method  string
		errPart string
	}{
		{"crypto erase", fakeReply{out: nvmeIDCtrlJSON(23, 4)},
			map[string][]fakeReply{"nvme format /dev/nvme0n1 -s 2 -f": {{}}}, MethodNVMeCrypto, ""},
		{"user data erase", fakeReply{out: nvmeIDCtrlJSON(23, 0)},
			map[string][]fakeReply{"nvme format /dev/nvme0n1 -s 1 -f": {{}}}, MethodNVMeUserData, ""},
		{"format unsupported", fakeReply{out: nvmeIDCtrlJSON(0, 0)}, nil, "", "did not return any supported format modes"},
		{"id-ctrl fails", fakeReply{out: "identify controller: Invalid argument", exit: 1}, nil, "",
			`"nvme id-ctrl /dev/nvme0n1 -o json" failed (exit status 1): identify controller: Invalid argument`},
		{"empty output", fakeReply{out: ""}, nil, "", "returned no information"},
		{"garbage output", fakeReply{out: "NVMe status: INVALID_FIELD"}, nil, "", "not the expected JSON"},
		{"format fails", fakeReply{out: nvmeIDCtrlJSON(23, 4)},
			map[string][]fakeReply{"nvme format /dev/nvme0n1 -s 2 -f": {{out: "NVMe status: INVALID_FORMAT: The LBA Format specified is not supported(0x410a)", exit: 1}}},
			"", `"nvme format /dev/nvme0n1 -s 2 -f" failed (exit status 1): NVMe status: INVALID_FORMAT`},
	} {
		t.Run(c.name, func(t *testing.T) {
			replies := map[string][]fakeReply{"nvme id-ctrl /dev/nvme0n1 -o json": {c.idctrl}}
			for k, v := range c.format {
				replies[k] = v
			}
			r := &fakeRunner{replies: replies}
			e := &Eraser{Guard: blockdev.NewGuard(nil), Runner: r, Root: t.TempDir()}
			res, err := e.nvmeErase(context.Background(), dev)
			if c.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), c.errPart) {
					t.Fatalf("error %v, want it to contain %q", err, c.errPart)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Method != c.method {
				t.Errorf("method %q, want %q", res.Method, c.method)
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

// A format whose fna says it hits every namespace must not run when another
// namespace of the controller is outside the guard.
func TestNVMeFormatAllNamespacesGuarded(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"sys/class/block/nvme0n1/device/nvme0n1", "sys/class/block/nvme0n1/device/nvme0c0n2", "sys/class/block/nvme0n1/device/hwmon1"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	replies := func() map[string][]fakeReply {
		return map[string][]fakeReply{
			"nvme id-ctrl /dev/nvme0n1 -o json": {{out: nvmeIDCtrlJSON(23, 5)}},
			"nvme format /dev/nvme0n1 -s 2 -f":  {{}},
		}
	}
	r := &fakeRunner{replies: replies()}
	e := &Eraser{Guard: blockdev.NewGuard([]string{"/dev/nvme0n1"}), Runner: r, Root: root}
	_, err := e.nvmeErase(context.Background(), "/dev/nvme0n1")
	if err == nil || !strings.Contains(err.Error(), "would also erase namespace /dev/nvme0n2") {
		t.Fatalf("got %v", err)
	}
	for _, c := range r.calls {
		if strings.HasPrefix(c, "nvme format") {
			t.Errorf("format ran: %q", r.calls)
		}
	}
	got, err := e.nvmeSiblingNamespaces("/dev/nvme0n1")
	if err != nil || !reflect.DeepEqual(got, []string{"/dev/nvme0n2"}) {
		t.Errorf("siblings %v %v", got, err)
	}
	// fna without the all-namespaces bits: only this namespace, no check.
	r = &fakeRunner{replies: map[string][]fakeReply{
		"nvme id-ctrl /dev/nvme0n1 -o json": {{out: nvmeIDCtrlJSON(23, 4)}},
		"nvme format /dev/nvme0n1 -s 2 -f":  {{}},
	}}
	e.Runner = r
	if res, err := e.nvmeErase(context.Background(), "/dev/nvme0n1"); err != nil || res.Method != MethodNVMeCrypto {
		t.Errorf("single-namespace format: %+v %v", res, err)
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
	replies := func() map[string][]fakeReply {
		return map[string][]fakeReply{
			"nvme id-ctrl " + dev + " -o json": {{out: nvmeIDCtrlJSON(23, 4)}},
			"nvme format " + dev + " -s 2 -f":  {{out: "NVMe status: ACCESS_DENIED: Access Denied(0x4286)", exit: 1}},
		}
	}
	e := &Eraser{Guard: blockdev.NewGuard([]string{dev}), Runner: &fakeRunner{replies: replies()}, Root: dir}
	o := DefaultEraseOptions()
	_, err := e.EraseBlockDevice(context.Background(), dev, o)
	if err == nil || !strings.Contains(err.Error(), "agent_continue_if_secure_erase_failed") ||
		!strings.Contains(err.Error(), `"nvme format `+dev+` -s 2 -f" failed (exit status 1): NVMe status: ACCESS_DENIED`) {
		t.Fatalf("without fallback: %v", err)
	}
	o.ContinueIfSecureEraseFailed = true
	e.Runner = &fakeRunner{replies: replies()}
	res, err := e.EraseBlockDevice(context.Background(), dev, o)
	if err != nil || res.Method != MethodOverwrite || !strings.Contains(res.Detail, "secure erase failed") {
		t.Fatalf("with fallback: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(dev); !bytes.Equal(b, make([]byte, len(b))) {
		t.Error("not zeroed after the fallback overwrite")
	}
	// NVMe secure erase disabled: straight to the overwrite, nvme never runs.
	r := &fakeRunner{replies: replies()}
	e.Runner = r
	o.EnableNVMeSecureErase = false
	if res, err := e.EraseBlockDevice(context.Background(), dev, o); err != nil || res.Method != MethodOverwrite || len(r.calls) != 0 {
		t.Errorf("disabled: %+v %v %q", res, err, r.calls)
	}
}
