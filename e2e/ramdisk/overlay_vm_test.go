package ramdisk_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
	ramdiskpkg "github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/overlay"
	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
	"github.com/ironic-go/ironic-agent/rescue"
)

// overlayStep is a vendor's clean step as a script for the ramdisk's
// busybox shell: it has the kernel load the overlay's firmware file
// (through the kernel's test_firmware module, which asks the firmware
// loader as a driver does) and reads back what the kernel loaded, and
// runs bzip2, a host program the overlay brought with its library, on it
// (by its path: busybox's shell would take its own bzip2 applet).
const overlayStep = `#!/bin/sh
set -e
printf %s ironic-agent/overlay-test.bin > /sys/devices/virtual/misc/test_firmware/trigger_request
fw=$(sha256sum /dev/test_firmware | cut -d' ' -f1)
bz=/usr/local/bin/bzip2
rt=$($bz -c /dev/test_firmware | $bz -dc | sha256sum | cut -d' ' -f1)
v=$($bz --help 2>&1 | head -n 1)
echo "{\"firmware_sha256\": \"$fw\", \"bzip2_sha256\": \"$rt\", \"bzip2\": \"$v\", \"path\": \"$PATH\"}"
`

// TestOverlayModuleInVM boots the agent ramdisk with an overlay
// (cmd/mkoverlay's archive, concatenated as an operator boots it) that
// adds kernel modules of the ramdisk's kernel the ramdisk lacks (softdog
// and the watchdog core it needs; test_firmware), a firmware file, a host
// program with the shared library the ramdisk lacks (bzip2, libbz2), a
// configuration file and a steps.d clean step: the init reads the
// overlay's module list and loads the modules (the kernel says so), the
// agent reads the file, and the step, run through the agent's API, gets
// the overlay's firmware file from the kernel's firmware loader byte for
// byte and runs the program. The overlay's root authorized_keys opens the
// debug login's SSH with no sshkey= on the kernel line.
func TestOverlayModuleInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine")
	}
	bzip2, err := exec.LookPath("bzip2")
	if err != nil {
		t.Skip("SKIPPED: needs bzip2 (Debian package bzip2; in test.sh), the overlay's host program")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	rd, k, tree := ramdiskModules(t, ctx, "softdog", "test_firmware")
	for _, m := range rd.Modules {
		if m == "softdog" || m == "watchdog" || m == "test_firmware" {
			t.Fatalf("the ramdisk carries %s already: pick another module for this test", m)
		}
	}
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	conf := write("site.conf", "[DEFAULT]\ndebug = true\n", 0o644)
	step := write("flash_overlay", overlayStep, 0o755)
	manifest := write("flash_overlay.json", `{"step": "flash_overlay", "interface": "management", "priority": 0, "clean": true, "timeout": 300}`+"\n", 0o644)
	fwData := make([]byte, 200<<10)
	if _, err := rand.Read(fwData); err != nil {
		t.Fatal(err)
	}
	fw := write("overlay-test.bin", string(fwData), 0o644)
	fwSum := sha256.Sum256(fwData)

	// Root's authorized_keys alone (no sshkey= or rootpwd=) opens the
	// debug login's SSH.
	site := newDebugCredentials(t).signer
	keys := write("authorized_keys", string(ssh.MarshalAuthorizedKey(site.PublicKey())), 0o600)
	m, addr, api := debugMachine(t, rd, "ironic-agent-overlay",
		// loglevel=7: softdog's pr_info line on the console.
		"loglevel=7 ipa-standalone=1 ipa-agent-token="+debugToken+" ipa-disk-wait-attempts=0")
	m.Disks = nil
	mod := func(name string) string { return filepath.Join(k.ModulesDir, tree.Path(name)) }
	// softdog needs the watchdog core, which the ramdisk lacks too.
	bootWithOverlay(t, rd, &m, overlay.Spec{
		Modules:  []string{mod("softdog"), mod("watchdog"), mod("test_firmware")},
		Firmware: []string{"ironic-agent/overlay-test.bin=" + fw},
		Programs: []string{bzip2},
		Files: []string{"etc/ironic-python-agent.d/site.conf=" + conf,
			"etc/ironic-agent/steps.d/flash_overlay=" + step, "etc/ironic-agent/steps.d/flash_overlay.json=" + manifest,
			strings.TrimPrefix(rescue.AuthorizedKeysFile, "/") + "=" + keys},
	})
	vm, fail := startVM(ctx, t, m)
	if _, err := vm.WaitFor(ctx, "softdog: initialized"); err != nil {
		fail("the overlay's module never loaded: %v", err)
	}
	l, err := vm.WaitFor(ctx, "overlay_lists=")
	if err != nil || !strings.Contains(l.Text, "overlay_lists=modules.d/overlay.list") {
		t.Errorf("the init did not name the overlay's module list: %v %q", err, l.Text)
	}
	if _, err := vm.WaitFor(ctx, "site.conf"); err != nil {
		t.Errorf("the agent never read the overlay's config file: %v\n%s", err, consoleTail(vm))
	}

	c := &agentclient.Client{Base: api, Token: debugToken}
	if err := c.WaitReady(ctx, 2*time.Second, func() bool { exited, _ := vm.Exited(); return exited }); err != nil {
		fail("agent API: %v", err)
	}
	res, err := c.Run(ctx, "clean.execute_clean_step", map[string]any{
		"step": map[string]any{"step": "flash_overlay", "interface": "management", "priority": 0, "reboot_requested": false, "abortable": false},
		"node": map[string]any{"uuid": "4c616273-0000-4000-8000-0000000000f1"}, "ports": []any{}, "clean_version": nil})
	if err != nil {
		fail("the overlay's step: %v", err)
	}
	var out struct {
		Result struct {
			Firmware string `json:"firmware_sha256"`
			Bzip2    string `json:"bzip2_sha256"`
			Version  string `json:"bzip2"`
			Path     string `json:"path"`
		} `json:"clean_result"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		t.Fatalf("the step's result %s: %v", res, err)
	}
	want := hex.EncodeToString(fwSum[:])
	if out.Result.Firmware != want {
		t.Errorf("the kernel loaded firmware with SHA-256 %q; the overlay's file has %s (result %s)", out.Result.Firmware, want, res)
	}
	// Busybox has a bzip2 applet too: the host's says what it is.
	if out.Result.Bzip2 != want || !strings.Contains(out.Result.Version, "block-sorting file compressor") {
		t.Errorf("the overlay's bzip2 (%q) gave back %q; want the firmware's %s", out.Result.Version, out.Result.Bzip2, want)
	}
	if !slices.Contains(filepath.SplitList(out.Result.Path), "/usr/local/bin") {
		t.Errorf("the step's PATH %q lacks /usr/local/bin, where the overlay's programs go", out.Result.Path)
	}
	t.Logf("step result: %s", res)
	if out, _, err := sshRun(ctx, addr, site, "id -u"); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("SSH with the overlay's authorized_keys alone: %q %v", out, err)
	}
}

// bootWithOverlay makes m boot rd's kernel and initramfs with the overlay
// spec describes (cmd/mkoverlay's archive, Base set to rd's initramfs)
// appended, as an operator concatenates one to a released ramdisk.
func bootWithOverlay(t *testing.T, rd *qemu.Ramdisk, m *qemu.Machine, spec overlay.Spec) {
	t.Helper()
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), overlaidInitrd(t, rd.InitrdFor(m.Firmware), rd, spec)
}

// overlaidInitrd writes the initramfs base with the overlay spec
// describes (cmd/mkoverlay's archive, Base set to rd's initramfs) appended
// and returns its path.
func overlaidInitrd(t *testing.T, base string, rd *qemu.Ramdisk, spec overlay.Spec) string {
	t.Helper()
	spec.Base = rd.Initrd
	var ov bytes.Buffer
	entries, err := overlay.Build(spec, &ov)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	initrd := filepath.Join(t.TempDir(), "initrd+overlay")
	if err := os.WriteFile(initrd, append(b, ov.Bytes()...), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("overlay: %d files, %d bytes", len(entries), ov.Len())
	return initrd
}

// ramdiskModules builds the suite's ramdisk and opens the module tree of
// its kernel; it skips t when that kernel lacks one of mods.
func ramdiskModules(t *testing.T, ctx context.Context, mods ...string) (*qemu.Ramdisk, *ramdiskpkg.Kernel, *kmod.Tree) {
	t.Helper()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := cachedir.Dir()
	if err != nil {
		t.Fatal(err)
	}
	k, err := qemu.FetchKernel(ctx, cache)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := kmod.Open(k.ModulesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, mod := range mods {
		if !tree.Has(mod) {
			t.Skipf("SKIPPED: kernel %s has no %s module", k.Version, mod)
		}
	}
	return rd, k, tree
}
