package hw

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
	"github.com/ironic-go/ironic-agent/rescue"
)

// keyboardToken is the standalone agent's pre-shared token (IPA's
// ipa-agent-token: at least 32 characters).
const keyboardToken = "keyboard0123456789abcdef0123456789abcdef"

// TestRescueLoginOnUSBKeyboardInVM logs in to the rescue console on the
// first virtual terminal with keys typed on a USB keyboard, as an
// operator does on a server's KVM or BMC console. The kernel's consoles
// are tty0 and ttyS0, so the rescue server gives a login on each; the
// standalone agent is told to rescue through its API (finalize_rescue,
// with a plaintext password it hashes as IPA does); QEMU's monitor then
// types (sendkey, one key at a time through usbhid) the user, the password
// and a command that writes which terminal it runs on to the serial port,
// where the test reads it.
func TestRescueLoginOnUSBKeyboardInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("SKIPPED: needs qemu-system-x86_64 (./test.sh installs qemu-system-x86)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The agent API's forward: a port free now (nothing in the guest
	// reaches back to it, so no fixed one is needed).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	m := qemu.DefaultMachine(qemu.BIOS)
	m.Name = "ironic-agent-keyboard"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.Disks = nil
	m.NICs = m.NICs[:1]
	m.HostFwd = map[int]int{port: 9999}
	m.USBKeyboard = true
	m.Monitor = filepath.Join(m.Dir, "monitor.sock")
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	// ttyS0 again after tty0: both are consoles, the serial one stays
	// /dev/console (the last one named), where the agent logs.
	m.Append = "console=tty0 console=ttyS0,115200 ipa-standalone=1 ipa-agent-token=" + keyboardToken + " ipa-disk-wait-attempts=0"
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	c := &agentclient.Client{Base: base, Token: keyboardToken}
	wctx, wcancel := context.WithTimeout(ctx, 15*time.Minute)
	defer wcancel()
	if err := c.WaitReady(wctx, 2*time.Second, func() bool { exited, _ := vm.Exited(); return exited }); err != nil {
		t.Fatalf("agent API: %v\n%s", err, vm.Tail())
	}
	const password = "kbd0pass9"
	if r, err := c.Post(ctx, "rescue.finalize_rescue", map[string]any{"rescue_password": password}, true); err != nil || r.HTTPStatus != 200 {
		t.Fatalf("finalize_rescue: %v %+v", err, r)
	}
	if _, err := vm.WaitFor(wctx, logtext.Msg(rescue.EventSSHListening)); err != nil {
		t.Fatal(err)
	}
	typed := time.Now()
	// An empty line first: a fresh prompt whatever came before.
	for _, text := range []string{"\n", "rescue\n", password + "\n"} {
		if err := sendKeys(ctx, vm, text); err != nil {
			t.Fatal(err)
		}
	}
	// The login, or its refusal: a refused one waits for no more.
	login, err := vm.WaitFor(wctx, strings.TrimSuffix(logtext.Msg(rescue.EventConsoleLogin), `"`))
	if err != nil || !strings.Contains(login.Text, logtext.Msg(rescue.EventConsoleLogin)+" ") || !strings.Contains(login.Text, "console=/dev/tty1") {
		t.Fatalf("no login on tty1: %v %q", err, login.Text)
	}
	if err := sendKeys(ctx, vm, "echo kbd-$((6*7)) on $(tty) >/dev/ttyS0\n"); err != nil {
		t.Fatal(err)
	}
	marker, err := vm.WaitFor(wctx, "kbd-42 on ")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("serial console: %q, %s after the first key; VM up %s", marker.Text, time.Since(typed).Round(time.Second), vm.Elapsed().Round(time.Second))
	if !strings.Contains(marker.Text, "kbd-42 on /dev/tty1") {
		t.Errorf("the command ran on %q, want /dev/tty1", marker.Text)
	}
}

// sendKeys types text on the machine's keyboard through QEMU's monitor,
// one sendkey a character (US layout).
func sendKeys(ctx context.Context, vm *qemu.VM, text string) error {
	for _, r := range text {
		k, err := qcode(r)
		if err != nil {
			return err
		}
		if out, err := vm.Monitor(ctx, "sendkey "+k); err != nil || strings.TrimSpace(out) != "" {
			return fmt.Errorf("sendkey %s: %v %q", k, err, out)
		}
	}
	return nil
}

// qcode is QEMU's key name for r on a US keyboard, with shift- where it
// takes shift.
func qcode(r rune) (string, error) {
	switch {
	case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		return string(r), nil
	case r >= 'A' && r <= 'Z':
		return "shift-" + strings.ToLower(string(r)), nil
	}
	if k, ok := map[rune]string{
		'\n': "ret", ' ': "spc", '-': "minus", '=': "equal", '/': "slash", '.': "dot", ',': "comma",
		'$': "shift-4", '(': "shift-9", ')': "shift-0", '*': "shift-8", '>': "shift-dot", '<': "shift-comma",
		'|': "shift-backslash", '_': "shift-minus", '"': "shift-apostrophe", '\'': "apostrophe",
	}[r]; ok {
		return k, nil
	}
	return "", fmt.Errorf("sendkey: no key for %q", r)
}
