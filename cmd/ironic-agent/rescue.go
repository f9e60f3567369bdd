package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/ironic-go/ironic-agent/internal/programs"
	"github.com/ironic-go/ironic-agent/internal/shacrypt"
	"github.com/ironic-go/ironic-agent/rescue"
)

// rescueSSHAddr is where the rescue SSH server listens: port 22 on every
// address, as IPA's ramdisk's sshd.
const rescueSSHAddr = ":22"

// rescueServer is agent.Options.Rescue for `ironic-agent run`: busybox's
// shell over SSH and on every kernel console, its applets in a directory
// of symbolic links below stateDir that leads the shells' PATH.
func rescueServer(log *slog.Logger, stateDir string) func(context.Context, *shacrypt.Hash) error {
	return func(ctx context.Context, password *shacrypt.Hash) error {
		shell, path, err := loginShell(ctx, log, filepath.Join(stateDir, "rescue-bin"))
		if err != nil {
			// Nothing to log in to: say so on the console and stay up.
			log.Error("rescue: no shell for the rescuer", "error", err)
			<-ctx.Done()
			return nil
		}
		return rescue.Serve(ctx, rescue.Config{
			Password: password,
			SSHAddr:  rescueSSHAddr,
			Consoles: rescue.Consoles("/sys"),
			Shell:    shell,
			Env:      []string{"PATH=" + path, "HOME=/", "PS1=rescue:\\w# "},
			Log:      log,
		})
	}
}

// loginShell is busybox and a PATH for the shells of logins: the applets
// linked into applets lead it when that works.
func loginShell(ctx context.Context, log *slog.Logger, applets string) (shell, path string, err error) {
	shell, err = registeredPath("busybox")
	if err != nil {
		return "", "", err
	}
	path = programs.RamdiskPath
	if err := installApplets(ctx, shell, applets); err != nil {
		log.Warn("busybox applets not linked; the shell has only its builtins and the ramdisk's programs", "error", err)
	} else {
		path = applets + ":" + path
	}
	return shell, path, nil
}

// registeredPath finds a program of the registry on PATH.
func registeredPath(name string) (string, error) {
	p, ok := programs.Lookup(name)
	if !ok {
		return "", &programs.UnregisteredError{Name: name}
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", &programs.MissingError{Program: p, Err: err}
	}
	return path, nil
}

// installApplets links every busybox applet into dir.
func installApplets(ctx context.Context, busybox, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, busybox, "--install", "-s", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("%s --install -s %s: %w: %s", busybox, dir, err, out)
	}
	return nil
}
