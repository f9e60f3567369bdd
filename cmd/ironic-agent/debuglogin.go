package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/clock"
	"github.com/ironic-go/ironic-agent/rescue"
)

// debugLoginDir holds the busybox applets of the debug login's shells.
const debugLoginDir = "/run/ironic-agent/debug-login"

func runDebugLogin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("debug-login", "",
		"Serve root logins for debugging, as diskimage-builder's dynamic-login element does in IPA's images:\n"+
			"SSH with the keys of the kernel parameter "+rescue.ParamSSHKey+"=\"<authorized_keys line(s)>\" and a login on every\n"+
			"kernel console with the password of "+rescue.ParamRootPassword+"=\"<SHA-crypt hash, or its base64>\". The ramdisk's\n"+
			"init starts it first thing when either parameter is given, or when the ramdisk holds\n"+
			rescue.AuthorizedKeysFile+" (an overlay's), whose keys it takes too; without them it serves nothing.", stderr)
	cmdlineFile := fs.String("kernel-cmdline", "/proc/cmdline", "read the kernel command line from `PATH`")
	keysFile := fs.String("authorized-keys", rescue.AuthorizedKeysFile, "also take root's SSH keys from the authorized_keys file `PATH` when it exists")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	raw, err := os.ReadFile(*cmdlineFile)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "debug-login")
	login, errs := rescue.ParseBootLogin(string(raw))
	for _, e := range errs {
		log.Error(rescue.EventDebugLoginRefused, "error", e)
	}
	if b, err := os.ReadFile(*keysFile); err == nil {
		keys, err := rescue.ParseAuthorizedKeys(b)
		if err != nil {
			log.Error(rescue.EventDebugLoginRefused, "error", fmt.Errorf("%s: %w: no SSH login from it", *keysFile, err))
		} else {
			login.AddKeys(keys)
			log.Info("debug login: keys of the authorized_keys file", "file", *keysFile, "keys", len(keys))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		log.Error(rescue.EventDebugLoginRefused, "error", fmt.Errorf("%s: %w: no SSH login from it", *keysFile, err))
	}
	if login.Empty() {
		log.Info("debug login: nothing to serve", "ssh_keys", 0, "console_password", false)
		return nil
	}
	shell, path, err := loginShell(ctx, log, debugLoginDir)
	if err != nil {
		return fmt.Errorf("debug login: no shell: %w", err)
	}
	consoles := rescue.Consoles("/sys")
	if login.Password != nil {
		log.Info("debug login: console logins", "user", rescue.DebugUser, "consoles", consoles)
	}
	// A rescue (finalize_rescue) takes port 22 and the consoles for its
	// own logins: make way for it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			if _, err := os.Stat("/" + agent.RescuedMarker); err == nil {
				log.Info("debug login: the machine is rescued: ending, the rescue logins take over")
				cancel()
				return
			}
			if clock.Sleep(ctx, 2*time.Second) != nil {
				return
			}
		}
	}()
	return rescue.Serve(ctx, rescue.Config{
		Name:                rescue.DebugName,
		User:                rescue.DebugUser,
		Password:            login.Password,
		ConsolePasswordOnly: true,
		AuthorizedKeys:      login.Keys,
		SSHAddr:             rescueSSHAddr,
		Consoles:            consoles,
		Shell:               shell,
		Env:                 []string{"PATH=" + path, "HOME=/root", "PS1=debug:\\w# "},
		Log:                 log,
	})
}
