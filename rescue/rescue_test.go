package rescue

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ironic-go/ironic-agent/internal/shacrypt"
)

const testPassword = "r3scue pässword"

// testShell is a Bourne shell of the host: busybox as in the ramdisk when
// installed, else /bin/sh.
func testShell(t *testing.T) string {
	if p, err := exec.LookPath("busybox"); err == nil {
		return p
	}
	return "/bin/sh"
}

// start runs Serve on a loopback port with consoles and returns the
// SSH address.
func start(t *testing.T, consoles ...string) string {
	t.Helper()
	h, err := shacrypt.New(shacrypt.SHA512, []byte(testPassword), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, Config{Password: h, Consoles: consoles})
}

// serveOn runs Serve with cfg on a loopback port, with the test's shell,
// and returns the SSH address; Serve ends with the test.
func serveOn(t *testing.T, cfg Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.SSHListener, cfg.Shell, cfg.FailDelay = ln, testShell(t), 10*time.Millisecond
	cfg.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	return ln.Addr().String()
}

func dial(addr, user, password string) (*ssh.Client, error) {
	return ssh.Dial("tcp", addr, &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{ssh.Password(password)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
}

// newSession logs in as rescue and opens a session.
func newSession(t *testing.T, addr string) (*ssh.Client, *ssh.Session) {
	t.Helper()
	c, err := dial(addr, "rescue", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

func TestSSHExec(t *testing.T) {
	c, s := newSession(t, start(t))
	var out, errOut bytes.Buffer
	s.Stdout, s.Stderr = &out, &errOut
	s.Stdin = strings.NewReader("from stdin\n")
	err := s.Run(`read line; echo "got $line as $USER"; echo oops >&2; exit 3`)
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 3 {
		t.Errorf("exit: %v, want status 3", err)
	}
	if out.String() != "got from stdin as rescue\n" || errOut.String() != "oops\n" {
		t.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
	}
	// A command that does not read its stdin still ends.
	s, _ = c.NewSession()
	if got, err := s.Output("echo ok"); err != nil || string(got) != "ok\n" {
		t.Errorf("echo ok: %q, %v", got, err)
	}
}

func TestSSHPTY(t *testing.T) {
	if _, err := os.Stat("/dev/ptmx"); err != nil {
		t.Skipf("SKIPPED: no /dev/ptmx: %v", err)
	}
	_, s := newSession(t, start(t))
	if err := s.RequestPty("xterm", 33, 101, ssh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	in, _ := s.StdinPipe()
	var out syncBuffer
	s.Stdout = &out
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(in, "tty; echo \"size $(stty size) term $TERM\"; echo X$((40+2))Y\n")
	waitFor(t, &out, "X42Y")
	fmt.Fprint(in, "exit 7\n")
	err := s.Wait()
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 7 {
		t.Errorf("exit: %v, want status 7", err)
	}
	text := out.String()
	if !strings.Contains(text, "/dev/pts/") || !strings.Contains(text, "size 33 101 term xterm") {
		t.Errorf("terminal session:\n%s", text)
	}
}

func TestSSHRefuses(t *testing.T) {
	addr := start(t)
	for _, up := range [][2]string{{"rescue", "wrong"}, {"root", testPassword}, {"rescue", ""}} {
		if c, err := dial(addr, up[0], up[1]); err == nil {
			c.Close()
			t.Errorf("user %q password %q logged in", up[0], up[1])
		}
	}
	c, err := dial(addr, "rescue", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Dial("tcp", addr); err == nil {
		t.Error("port forwarding was allowed")
	}
	s, _ := c.NewSession()
	if err := s.RequestSubsystem("sftp"); err == nil {
		t.Error("the sftp subsystem was accepted")
	}
}

// TestOpenSSHClient logs in with Debian's ssh, the password given through
// SSH_ASKPASS, and runs a command with and without a terminal.
func TestOpenSSHClient(t *testing.T) {
	sshPath, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("SKIPPED: needs ssh (Debian package openssh-client; in test.sh)")
	}
	addr := start(t)
	host, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	askpass := filepath.Join(dir, "askpass")
	if err := os.WriteFile(askpass, []byte("#!/bin/sh\nprintf '%s\\n' '"+testPassword+"'\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"exec", nil, "hello from rescue"},
		{"pty", []string{"-tt"}, "hello from rescue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			args := append([]string{"-F", "/dev/null", "-p", port, "-o", "StrictHostKeyChecking=no",
				"-o", "UserKnownHostsFile=/dev/null", "-o", "PreferredAuthentications=password,keyboard-interactive",
				"-o", "PubkeyAuthentication=no", "-o", "LogLevel=ERROR"}, tc.args...)
			args = append(args, "rescue@"+host, "echo hello from $USER; tty >/dev/null && echo with-tty; exit 5")
			cmd := exec.CommandContext(ctx, sshPath, args...)
			cmd.Env = append(os.Environ(), "SSH_ASKPASS="+askpass, "SSH_ASKPASS_REQUIRE=force", "DISPLAY=none")
			cmd.Stdin = nil
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 5 {
				t.Errorf("ssh: %v, want exit status 5; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output %q, want %q", out, tc.want)
			}
			if withTTY := strings.Contains(string(out), "with-tty"); withTTY != (tc.name == "pty") {
				t.Errorf("output %q: terminal %v, want %v", out, withTTY, tc.name == "pty")
			}
		})
	}
	// A wrong password is refused.
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho wrong\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sshPath, "-F", "/dev/null", "-p", port, "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1",
		"rescue@"+host, "echo in")
	cmd.Env = append(os.Environ(), "SSH_ASKPASS="+bad, "SSH_ASKPASS_REQUIRE=force", "DISPLAY=none")
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), "in\n") || !strings.Contains(string(out), "Permission denied") {
		t.Errorf("wrong password: %v:\n%s", err, out)
	}
}

// TestConsoleLogin drives the login on a pseudo-terminal standing for a
// serial console.
func TestConsoleLogin(t *testing.T) {
	if _, err := os.Stat("/dev/ptmx"); err != nil {
		t.Skipf("SKIPPED: no /dev/ptmx: %v", err)
	}
	m, s, err := openPTY()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dev := s.Name()
	// Keep the slave open so the terminal survives between logins.
	defer s.Close()
	start(t, dev)
	var out syncBuffer
	go func() { _, _ = io.Copy(&out, m) }()
	waitFor(t, &out, "login: ")
	fmt.Fprint(m, "rescue\n")
	waitFor(t, &out, "Password: ")
	fmt.Fprint(m, "not it\n")
	waitFor(t, &out, "Login incorrect")
	waitForCount(t, &out, "login: ", 2)
	fmt.Fprint(m, "rescue\n")
	waitForCount(t, &out, "Password: ", 2)
	fmt.Fprint(m, testPassword+"\n")
	fmt.Fprint(m, "echo M$((6*7))M $USER $TERM; tty\n")
	waitFor(t, &out, "M42M rescue vt220")
	fmt.Fprint(m, "exit\n")
	waitForCount(t, &out, "login: ", 3)
	if strings.Contains(out.String(), "not it") || strings.Contains(out.String(), testPassword) {
		t.Errorf("a password was echoed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), dev) {
		t.Errorf("the shell's terminal is not %s:\n%s", dev, out.String())
	}
}

func TestParseConsoles(t *testing.T) {
	for in, want := range map[string][]string{
		"tty0 ttyS0\n": {"/dev/tty1", "/dev/ttyS0"},
		"ttyS1":        {"/dev/ttyS1"},
		"":             nil,
		"../x hvc0":    {"/dev/hvc0"},
	} {
		if got := parseConsoles(in); !slices.Equal(got, want) {
			t.Errorf("parseConsoles(%q) = %q, want %q", in, got, want)
		}
	}
}

// syncBuffer is a bytes.Buffer for one writer and one reader goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitFor(t *testing.T, b *syncBuffer, s string) { t.Helper(); waitForCount(t, b, s, 1) }

func waitForCount(t *testing.T, b *syncBuffer, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(b.String(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("no %d× %q in:\n%s", n, s, b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
