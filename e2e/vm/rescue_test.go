package vm

import (
	"context"
	"errors"
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
	if err := vm.Login(ctx, qemu.ConsoleLogin{Banner: "log in as rescue with the rescue password", User: "rescue", Password: password, Want: want}); err != nil {
		t.Fatal(err)
	}
}
