// Package rescue is what a rescued machine offers its rescuer once the
// agent stopped serving Ironic (rescue.finalize_rescue): an SSH server and
// a login on each serial console, both for the user "rescue" with the
// password Ironic sent, both starting a real shell. IPA's ramdisk does the
// same with sshd, a getty and a rescue user it adds; here it is one
// process and no user database. The shell runs as root, as IPA's rescue
// user can through its password-less sudo.
package rescue

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/shacrypt"
)

// User is the only user name that logs in.
const User = "rescue"

// Config is what Serve needs.
type Config struct {
	// Password is the rescue password's hash, as Ironic sent it (or as the
	// agent hashed a plaintext one).
	Password *shacrypt.Hash
	// SSHAddr is the SSH server's address (":22"); "" starts none.
	SSHAddr string
	// SSHListener, when set, is used instead of listening on SSHAddr.
	SSHListener net.Listener
	// HostKey signs the SSH handshake; nil: a fresh Ed25519 key, whose
	// fingerprint is logged so the rescuer can check it on the console.
	HostKey ssh.Signer
	// Consoles are the terminal devices (/dev/ttyS0) that get a login
	// prompt.
	Consoles []string
	// Shell is a Bourne shell (busybox, dash): "<Shell> -c CMD" runs an
	// SSH exec request, a login shell (argv[0] "-sh") the interactive
	// sessions.
	Shell string
	// Env is the shells' environment (PATH, HOME); TERM, USER and
	// LOGNAME are added.
	Env []string
	// Dir is the shells' working directory; "": "/".
	Dir string
	// FailDelay is the pause after a wrong password (2 s).
	FailDelay time.Duration
	Log       *slog.Logger
}

// Serve runs the SSH server and the console logins until ctx ends. It
// returns early only when the SSH server cannot listen.
func Serve(ctx context.Context, cfg Config) error {
	if cfg.Password == nil {
		return errors.New("rescue: no password hash")
	}
	if cfg.Shell == "" {
		return errors.New("rescue: no shell")
	}
	cfg.Log = logging.OrDiscard(cfg.Log)
	if cfg.FailDelay == 0 {
		cfg.FailDelay = 2 * time.Second
	}
	if cfg.Dir == "" {
		cfg.Dir = "/"
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, dev := range cfg.Consoles {
		wg.Go(func() { consoleLogins(ctx, cfg, dev) })
	}
	if cfg.SSHAddr == "" && cfg.SSHListener == nil {
		<-ctx.Done()
		return nil
	}
	srv, err := newSSHServer(cfg)
	if err != nil {
		return err
	}
	ln := cfg.SSHListener
	if ln == nil {
		if ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.SSHAddr); err != nil {
			return fmt.Errorf("rescue: SSH server on %s: %w", cfg.SSHAddr, err)
		}
	}
	cfg.Log.Info(EventSSHListening, "address", ln.Addr().String(), "user", User,
		"host_key", ssh.FingerprintSHA256(srv.hostKey.PublicKey()))
	return srv.serve(ctx, ln)
}

// verify checks a user and password, pausing after a wrong one.
func (cfg Config) verify(ctx context.Context, user string, password []byte) bool {
	ok := cfg.Password.Verify(password)
	if user == User && ok {
		return true
	}
	select {
	case <-ctx.Done():
	case <-time.After(cfg.FailDelay):
	}
	return false
}

// env is the shell's environment for a terminal of type term ("" without one).
func (cfg Config) env(term string, extra []string) []string {
	env := append([]string{}, cfg.Env...)
	env = append(env, "USER="+User, "LOGNAME="+User, "SHELL="+cfg.Shell)
	if term != "" {
		env = append(env, "TERM="+term)
	}
	return append(env, extra...)
}

// newHostKey makes a fresh Ed25519 host key.
func newHostKey() (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("rescue: host key: %w", err)
	}
	return ssh.NewSignerFromKey(priv)
}

// Consoles returns the terminal devices of the kernel's consoles, read
// from sysfs (/sys/class/tty/console/active, e.g. "tty0 ttyS0"): tty0
// (the foreground virtual terminal) is tty1.
func Consoles(sysfs string) []string {
	b, err := os.ReadFile(sysfs + "/class/tty/console/active")
	if err != nil {
		return nil
	}
	return parseConsoles(string(b))
}

func parseConsoles(active string) []string {
	var out []string
	for _, name := range strings.Fields(active) {
		if name == "tty0" {
			name = "tty1"
		}
		if strings.ContainsAny(name, "/.") {
			continue
		}
		dev := "/dev/" + name
		if !slices.Contains(out, dev) {
			out = append(out, dev)
		}
	}
	return out
}
