package hwmgr

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

func TestMain(m *testing.M) { looptest.Main(m.Run) }

// examplesDir holds the porting guide's steps (docs/steps.md), which
// TestPortingGuideExamples runs.
const examplesDir = "../../docs/examples/steps.d"

// busyboxPath gives the child processes of the test a PATH of busybox's
// applets only, as the ramdisk's steps have (busybox-static, which
// ./test.sh installs), plus extra.
func busyboxPath(t *testing.T, extra string) {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("SKIPPED: needs busybox (Debian's busybox-static, which ./test.sh installs): the ramdisk's steps run with its applets")
	}
	dir := t.TempDir()
	if out, err := exec.Command(bb, "--install", "-s", dir).CombinedOutput(); err != nil {
		t.Fatalf("busybox --install -s %s: %v: %s", dir, err, out)
	}
	t.Setenv("PATH", dir+":"+extra)
}

func args(t *testing.T, kv map[string]any) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for k, v := range kv {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = b
	}
	return out
}

// TestPortingGuideExamples runs the firmware step of the porting guide as
// the agent runs it: on its vendor's machine it downloads, checks and
// flashes; on another it falls through to the next manager's step; a
// wrong digest or a missing argument fails it, saying which.
func TestPortingGuideExamples(t *testing.T) {
	firmware := []byte("ACME BMC firmware 4.2\n")
	sum := sha256.Sum256(firmware)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/bmc-4.2.bin" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(firmware)
	}))
	defer srv.Close()
	tools := t.TempDir()
	flashed := filepath.Join(t.TempDir(), "flashed")
	tool := filepath.Join(tools, "flashfw")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho \"flashfw $*\" >"+flashed+"\ncat \"$2\" >>"+flashed+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	busyboxPath(t, tools)

	vendor := "ACME"
	x := NewExecSteps(examplesDir, func(context.Context) (any, error) {
		return map[string]any{"system_vendor": map[string]any{"manufacturer": vendor, "product_name": "R9000"}}, nil
	})
	if err := x.LoadError(); err != nil {
		t.Fatal(err)
	}
	generic := &fakeMgr{name: "generic_hardware_manager", class: "GenericHardwareManager", support: SupportGeneric,
		run: map[string]func() (any, error){"flash_firmware": func() (any, error) { return "another manager's flash_firmware", nil }}}
	s, err := Load(t.Context(), []func() Manager{func() Manager { return generic }, func() Manager { return x }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	node := map[string]any{"uuid": "3b1b4a4e-0b8e-4bc0-9a4c-3f0e6e1f6d21"}
	good := args(t, map[string]any{"url": srv.URL + "/bmc-4.2.bin", "sha256": hex.EncodeToString(sum[:]), "tool": tool})

	v, err := s.Dispatch(t.Context(), "flash_firmware", Request{Node: node, Args: good})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := v.(map[string]any); !ok || m["sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("result %v", v)
	}
	rec, err := os.ReadFile(flashed)
	if err != nil || !strings.HasPrefix(string(rec), "flashfw --image ") || !strings.HasSuffix(string(rec), string(firmware)) {
		t.Errorf("the vendor tool saw %q (%v)", rec, err)
	}

	bad := args(t, map[string]any{"url": srv.URL + "/bmc-4.2.bin", "sha256": strings.Repeat("0", 64), "tool": tool})
	if _, err := s.Dispatch(t.Context(), "flash_firmware", Request{Node: node, Args: bad}); err == nil || !strings.Contains(err.Error(), "SHA-256 "+hex.EncodeToString(sum[:])+", want 000") {
		t.Errorf("a wrong digest: %v", err)
	}
	if _, err := s.Dispatch(t.Context(), "flash_firmware", Request{Node: node, Args: args(t, map[string]any{"sha256": "x"})}); err == nil || !strings.Contains(err.Error(), "the argument url is required") {
		t.Errorf("no url: %v", err)
	}

	vendor = "Other"
	if v, err := s.Dispatch(t.Context(), "flash_firmware", Request{Node: node, Args: good}); err != nil || v != "another manager's flash_firmware" {
		t.Errorf("on another vendor's machine the next manager's step must run: %v, %v", v, err)
	}
}

// TestPortingGuideSiteData runs the porting guide's deploy step against a
// filesystem of the test's own, found by its label as the step finds the
// deployed image's root.
func TestPortingGuideSiteData(t *testing.T) {
	looptest.RequireRoot(t, "mkfs.ext4")
	dev := looptest.Attach(t, 32<<20)
	label := "site-" + rand.Text()[:8]
	looptest.Run(t, "mkfs.ext4", "-q", "-L", label, dev)
	busyboxPath(t, "")

	x := NewExecSteps(examplesDir, nil)
	if err := x.LoadError(); err != nil {
		t.Fatal(err)
	}
	content := "storage_ip=192.0.2.41/24"
	v, err := x.ExecuteStep(t.Context(), "write_site_data", Request{Node: map[string]any{"uuid": "n-1"},
		Args: args(t, map[string]any{"path": "/etc/site/storage.conf", "content": content, "root_label": label})})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := v.(map[string]any); !ok || m["device"] != dev {
		t.Errorf("result %v, want the device %s", v, dev)
	}
	mnt := t.TempDir()
	if err := unix.Mount(dev, mnt, "ext4", unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Unmount(mnt, 0) }()
	got, err := os.ReadFile(filepath.Join(mnt, "etc/site/storage.conf"))
	if err != nil || string(got) != content+"\n" {
		t.Errorf("storage.conf: %q (%v)", got, err)
	}

	_, err = x.ExecuteStep(t.Context(), "write_site_data", Request{
		Args: args(t, map[string]any{"path": "/x", "content": "y", "root_label": label + "-none"})})
	if err == nil || !strings.Contains(err.Error(), "no filesystem labelled "+label+"-none") {
		t.Errorf("no such label: %v", err)
	}
}
