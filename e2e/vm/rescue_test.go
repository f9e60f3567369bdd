package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// rescuePassword has a blank and a shell character, which neither Ironic's
// hash nor the logins may mangle.
const rescuePassword = "S3cret rescue$pw"

// rescueSSH runs command as rescue on host (port 22) with Debian's ssh
// from inside network namespace netns, the password given through
// SSH_ASKPASS, and returns its output.
func rescueSSH(t *testing.T, ctx context.Context, netns, host, password string, args []string, command string) (string, error) {
	t.Helper()
	askpass := filepath.Join(t.TempDir(), "askpass")
	script := "#!/bin/sh\nprintf '%s\\n' '" + strings.ReplaceAll(password, "'", `'\''`) + "'\n"
	if err := os.WriteFile(askpass, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	all := append([]string{"netns", "exec", netns, "ssh", "-F", "/dev/null",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-o", "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1", "-o", "ConnectTimeout=60"}, args...)
	all = append(all, "rescue@"+host, command)
	cmd := exec.CommandContext(ctx, "ip", all...)
	cmd.Env = append(os.Environ(), "SSH_ASKPASS="+askpass, "SSH_ASKPASS_REQUIRE=force", "DISPLAY=none")
	out, err := cmd.CombinedOutput()
	t.Logf("ssh %s %q: %v\n%s", strings.Join(args, " "), command, err, out)
	return string(out), err
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// consoleLogin logs in as rescue on the serial console with password and
// waits for want: "Login incorrect", or what the shell's command prints.
func consoleLogin(t *testing.T, ctx context.Context, vm *qemu.VM, password, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// A prompt may be stale or have the agent's log lines after it: an
	// empty user name brings a fresh one, whose first line is the banner
	// (the prompt itself ends without a newline).
	seen := len(vm.Lines())
	if err := vm.Type("\n"); err != nil {
		t.Fatal(err)
	}
	banner, err := waitLine(ctx, vm, seen, "the login banner", func(l string) bool {
		return strings.Contains(l, "log in as rescue with the rescue password")
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.Type("rescue\n"); err != nil {
		t.Fatal(err)
	}
	// The terminal echoes the user name as it arrives, before the login
	// reads it; the login turns the echo off, then prompts for the
	// password, which is typed only then. The prompt's line ends only
	// after the password: it is the console's tail, or a line of its own
	// if one of the agent's log lines came right after it.
	echo, err := waitLine(ctx, vm, banner+1, "the user name's echo", func(l string) bool {
		return strings.HasSuffix(strings.TrimSpace(l), "rescue")
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := waitPrompt(ctx, vm, echo+1, "Password: "); err != nil {
		t.Fatal(err)
	}
	if err := vm.Type(password + "\n"); err != nil {
		t.Fatal(err)
	}
	if want != "Login incorrect" {
		if err := vm.Type("echo SERIAL-$((6*7)) as $USER\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitAfter(ctx, vm, seen, want); err != nil {
		t.Fatal(err)
	}
	if want != "Login incorrect" {
		// Not on the command's line: the kernel hangs up a serial line
		// whose session leader exits, dropping output still queued.
		n := len(vm.Lines())
		if err := vm.Type("exit\n"); err != nil {
			t.Fatal(err)
		}
		if err := waitAfter(ctx, vm, n, "log in as rescue with the rescue password"); err != nil {
			t.Fatalf("no login prompt after the shell's exit: %v", err)
		}
	}
	for _, l := range vm.Lines()[seen:] {
		if strings.Contains(l.Text, password) {
			t.Errorf("the console echoed the password: %q", l.Text)
		}
	}
}

// waitAfter waits for a console line holding s among the lines after the
// first n.
func waitAfter(ctx context.Context, vm *qemu.VM, n int, s string) error {
	_, err := waitLine(ctx, vm, n, s, func(l string) bool { return strings.Contains(l, s) })
	return err
}

// waitPrompt waits for prompt, the unended last line of the console
// (VM.Tail) or in a line after the first n.
func waitPrompt(ctx context.Context, vm *qemu.VM, n int, prompt string) error {
	for {
		if strings.HasSuffix(vm.Tail(), prompt) {
			return nil
		}
		lines := vm.Lines()
		for i := min(n, len(lines)); i < len(lines); i++ {
			if strings.Contains(lines[i].Text, prompt) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no prompt %q on the console after line %d: %w", prompt, n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitLine waits for a console line after the first n that match accepts
// and returns its index; what names it in an error.
func waitLine(ctx context.Context, vm *qemu.VM, n int, what string, match func(string) bool) (int, error) {
	for {
		lines := vm.Lines()
		for i := min(n, len(lines)); i < len(lines); i++ {
			if match(lines[i].Text) {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no %q on the console after line %d: %w", what, n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
