// Package rescue is what a rescued machine offers its rescuer once the
// agent stopped serving Ironic (rescue.finalize_rescue): an SSH server and
// a login on each serial console, both for the user "rescue" with the
// password Ironic sent, both starting a real shell. IPA's ramdisk does the
// same with sshd, a getty and a rescue user it adds; here it is one
// process and no user database. The shell runs as root, as IPA's rescue
// user can through its password-less sudo.
package rescue

import (
	"bytes"
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
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ironic-go/ironic-agent/internal/clock"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/shacrypt"
)

// User is the only user name that logs in.
const User = "rescue"

// Config is what Serve needs.
type Config struct {
	// User is the one user name that logs in; "": User.
	User string
	// Password is the password's hash: the rescue password as Ironic
	// sent it (or as the agent hashed a plaintext one), or rootpwd's.
	// nil: no password logins, and no console logins at all.
	Password *shacrypt.Hash
	// ConsolePasswordOnly keeps the password off SSH, which then takes
	// AuthorizedKeys only (sshd's PermitRootLogin prohibit-password).
	ConsolePasswordOnly bool
	// AuthorizedKeys log in over SSH by public key.
	AuthorizedKeys []ssh.PublicKey
	// Name starts the log messages and the console banner ("rescue";
	// "": "rescue").
	Name string
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
	if cfg.User == "" {
		cfg.User = User
	}
	if cfg.Name == "" {
		cfg.Name = "rescue"
	}
	if cfg.Password == nil && len(cfg.AuthorizedKeys) == 0 {
		return errors.New(cfg.Name + ": no password hash and no authorized key")
	}
	if cfg.Shell == "" {
		return errors.New(cfg.Name + ": no shell")
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
	if cfg.Password != nil {
		for _, dev := range cfg.Consoles {
			wg.Go(func() { consoleLogins(ctx, cfg, dev) })
		}
	}
	if cfg.SSHAddr == "" && cfg.SSHListener == nil || !cfg.sshAuth() {
		<-ctx.Done()
		return nil
	}
	srv, err := newSSHServer(cfg)
	if err != nil {
		return err
	}
	ln := cfg.SSHListener
	if ln == nil {
		if ln, err = listen(ctx, cfg.SSHAddr); err != nil {
			return fmt.Errorf("%s: SSH server on %s: %w", cfg.Name, cfg.SSHAddr, err)
		}
	}
	cfg.Log.Info(cfg.Name+sshListening, "address", ln.Addr().String(), "user", cfg.User,
		"host_key", ssh.FingerprintSHA256(srv.hostKey.PublicKey()), "authorized_keys", len(cfg.AuthorizedKeys),
		"password", cfg.Password != nil && !cfg.ConsolePasswordOnly)
	return srv.serve(ctx, ln)
}

// sshAuth reports whether anyone can log in over SSH.
func (cfg Config) sshAuth() bool {
	return len(cfg.AuthorizedKeys) > 0 || cfg.Password != nil && !cfg.ConsolePasswordOnly
}

// listen listens on addr, retrying for a while when it is in use: the
// debug login (cmd/ironic-agent debug-login) leaves port 22 to a rescue
// within a few seconds of the rescue's start.
func listen(ctx context.Context, addr string) (net.Listener, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return ln, err
		}
		if err := clock.Sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

// verify checks a user and password, pausing after a wrong one.
func (cfg Config) verify(ctx context.Context, user string, password []byte) bool {
	ok := cfg.Password != nil && cfg.Password.Verify(password)
	if user == cfg.User && ok {
		return true
	}
	cfg.failPause(ctx)
	return false
}

// failPause is the pause after a refused login.
func (cfg Config) failPause(ctx context.Context) {
	_ = clock.Sleep(ctx, cfg.FailDelay)
}

// authorized reports whether key is one of AuthorizedKeys for user.
func (cfg Config) authorized(user string, key ssh.PublicKey) bool {
	if user != cfg.User {
		return false
	}
	m := key.Marshal()
	for _, k := range cfg.AuthorizedKeys {
		if bytes.Equal(k.Marshal(), m) {
			return true
		}
	}
	return false
}

// env is the shell's environment for a terminal of type term ("" without one).
func (cfg Config) env(term string, extra []string) []string {
	env := append([]string{}, cfg.Env...)
	env = append(env, "USER="+cfg.User, "LOGNAME="+cfg.User, "SHELL="+cfg.Shell)
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
