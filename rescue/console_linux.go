package rescue

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/clock"
)

// consoleLogins is a getty and login on one terminal device: prompt for
// the user and the password (not echoed), start a login shell with the
// terminal as its controlling terminal, and prompt again when it exits.
func consoleLogins(ctx context.Context, cfg Config, dev string) {
	log := cfg.Log.With("console", dev)
	host, _ := os.Hostname()
	if host == "" || host == "(none)" {
		host = "localhost" // a ramdisk DHCP gave no name
	}
	for ctx.Err() == nil {
		err := consoleLogin(ctx, cfg, dev, host)
		if err != nil && ctx.Err() == nil {
			log.Warn(cfg.Name+consoleLoginMsg, "error", err)
			// A console that cannot be opened stays so: do not spin.
			_ = clock.Sleep(ctx, 10*time.Second)
		}
	}
}

// consoleLogin is one login on dev: it returns after a wrong password or
// when the shell exits.
func consoleLogin(ctx context.Context, cfg Config, dev, host string) error {
	f, err := os.OpenFile(dev, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	if err := setEcho(f, true); err != nil {
		return fmt.Errorf("%s: terminal settings: %w", dev, err)
	}
	r := bufio.NewReader(f)
	// An empty line prompts again, banner and all, on the same reader:
	// what was typed after it may sit in r's buffer already, and a new
	// reader would lose it.
	var user string
	for user == "" {
		fmt.Fprintf(f, "\r\nironic-agent %s: log in as %s with the %s password\r\n%s login: ", cfg.Name, cfg.User, cfg.Name, host)
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("%s: read the user: %w", dev, err)
		}
		user = strings.TrimSpace(line)
	}
	// Echo off before the prompt: what is typed after it is never shown.
	if err := setEcho(f, false); err != nil {
		return fmt.Errorf("%s: terminal settings: %w", dev, err)
	}
	fmt.Fprint(f, "Password: ")
	pw, err := r.ReadString('\n')
	_ = setEcho(f, true)
	fmt.Fprint(f, "\r\n")
	if err != nil {
		return fmt.Errorf("%s: read the password: %w", dev, err)
	}
	if !cfg.verify(ctx, user, []byte(strings.TrimRight(pw, "\r\n"))) {
		cfg.Log.Warn(cfg.Name+consoleLoginMsg+" refused", "console", dev, "user", user)
		fmt.Fprint(f, "Login incorrect\r\n")
		return nil
	}
	cfg.Log.Info(cfg.Name+consoleLoginMsg, "console", dev, "user", user)
	// The shell gets its own descriptor of the terminal: f's is
	// non-blocking (the runtime polls it), which a shell does not expect.
	tty, err := os.OpenFile(dev, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer tty.Close()
	cmd := &exec.Cmd{Path: cfg.Shell, Args: []string{"-sh"}, Env: cfg.env(terminalType(dev), nil), Dir: cfg.Dir,
		Stdin: tty, Stdout: tty, Stderr: tty,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start the shell: %w", dev, err)
	}
	_ = cmd.Wait() // the status is in cmd.ProcessState
	cfg.Log.Info(cfg.Name+": console shell ended", "console", dev, "status", exitStatus(cmd))
	return nil
}

// terminalType is TERM for a console: "linux" on a virtual terminal,
// "vt220" on a serial line (what agetty assumes).
func terminalType(dev string) string {
	if strings.HasPrefix(dev, "/dev/tty") && len(dev) > len("/dev/tty") && dev[len("/dev/tty")] >= '0' && dev[len("/dev/tty")] <= '9' {
		return "linux"
	}
	return "vt220"
}

// setEcho puts the terminal in canonical mode with CR-to-NL input and
// NL-to-CRLF output (a sane serial line), echoing or not.
func setEcho(f *os.File, echo bool) error {
	return control(f, func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			return err
		}
		t.Iflag |= unix.ICRNL
		t.Iflag &^= unix.INLCR | unix.IGNCR
		t.Oflag |= unix.OPOST | unix.ONLCR
		t.Lflag |= unix.ICANON | unix.ISIG
		if echo {
			t.Lflag |= unix.ECHO | unix.ECHOE | unix.ECHOK
		} else {
			t.Lflag &^= unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHONL
		}
		if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
			return err
		}
		return nil
	})
}
