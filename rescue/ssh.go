package rescue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ironic-go/ironic-agent/internal/lazyregexp"
)

type sshServer struct {
	cfg     Config
	config  *ssh.ServerConfig
	hostKey ssh.Signer
}

func newSSHServer(cfg Config) (*sshServer, error) {
	key := cfg.HostKey
	if key == nil {
		var err error
		if key, err = newHostKey(); err != nil {
			return nil, err
		}
	}
	s := &sshServer{cfg: cfg, hostKey: key}
	s.config = &ssh.ServerConfig{
		ServerVersion: "SSH-2.0-ironic-agent-" + strings.ReplaceAll(cfg.Name, " ", "-"),
		MaxAuthTries:  3,
	}
	s.config.AddHostKey(key)
	return s, nil
}

// serve accepts connections until ctx ends.
func (s *sshServer) serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return fmt.Errorf("rescue: SSH accept: %w", err)
		}
		wg.Go(func() { s.handleConn(ctx, c) })
	}
}

// handshakeTimeout bounds the key exchange and authentication, so a
// silent client does not hold a connection.
const handshakeTimeout = time.Minute

func (s *sshServer) handleConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	log := s.cfg.Log.With("remote", c.RemoteAddr().String())
	cfg := *s.config
	if s.cfg.Password != nil && !s.cfg.ConsolePasswordOnly {
		cfg.PasswordCallback = func(md ssh.ConnMetadata, pw []byte) (*ssh.Permissions, error) {
			if s.cfg.verify(ctx, md.User(), pw) {
				return nil, nil
			}
			log.Warn(s.cfg.Name+": SSH login refused", "user", md.User(), "method", "password")
			return nil, errors.New("wrong user or password")
		}
	}
	if len(s.cfg.AuthorizedKeys) > 0 {
		cfg.PublicKeyCallback = func(md ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			// Called for each key the client offers before it signs with
			// one: a refusal here is no failed login yet, so no pause.
			if s.cfg.authorized(md.User(), key) {
				return nil, nil
			}
			log.Warn(s.cfg.Name+": SSH key refused", "user", md.User(), "key", ssh.FingerprintSHA256(key))
			return nil, errors.New("key not authorized")
		}
	}
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	conn, chans, reqs, err := ssh.NewServerConn(c, &cfg)
	if err != nil {
		log.Info(s.cfg.Name+": SSH handshake ended", "error", err)
		return
	}
	_ = c.SetDeadline(time.Time{})
	defer conn.Close()
	log.Info(s.cfg.Name+": SSH login", "user", conn.User(), "client", string(conn.ClientVersion()))
	go ssh.DiscardRequests(reqs) // no global requests: no port forwarding
	var wg sync.WaitGroup
	defer wg.Wait()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only session channels: no forwarding")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			log.Warn(s.cfg.Name+": SSH channel", "error", err)
			continue
		}
		wg.Go(func() { (&session{cfg: s.cfg, ch: ch, log: log}).run(ctx, creqs) })
	}
}

// session is one SSH session channel: at most one pty, one shell or
// command.
type session struct {
	cfg  Config
	ch   ssh.Channel
	log  *slog.Logger
	term string
	win  winsize
	pty  *os.File // the master, after pty-req
	tty  *os.File // the slave, until the process starts
	env  []string
	done chan struct{} // closed when the process has exited
}

type winsize struct{ cols, rows uint32 }

// acceptedEnv are the environment variables a client may set (sshd's
// usual AcceptEnv).
var acceptedEnv = lazyregexp.New(`^(LANG|LC_[A-Z_]+)$`)

func (s *session) run(ctx context.Context, reqs <-chan *ssh.Request) {
	defer s.ch.Close()
	defer func() {
		if s.pty != nil {
			s.pty.Close()
		}
		if s.tty != nil {
			s.tty.Close()
		}
	}()
	for {
		var req *ssh.Request
		var ok bool
		select {
		case req, ok = <-reqs:
		case <-s.done:
			return
		case <-ctx.Done():
			return
		}
		if !ok {
			// The client closed the channel; a running process ends with
			// its terminal or its stdin.
			if s.done != nil {
				select {
				case <-s.done:
				case <-ctx.Done():
				}
			}
			return
		}
		reply := func(ok bool) {
			if req.WantReply {
				_ = req.Reply(ok, nil)
			}
		}
		switch req.Type {
		case "pty-req":
			var p struct {
				Term                 string
				Cols, Rows, Wpx, Hpx uint32
				Modes                string
			}
			if s.pty != nil || s.done != nil || ssh.Unmarshal(req.Payload, &p) != nil {
				reply(false)
				continue
			}
			m, t, err := openPTY()
			if err != nil {
				s.log.Info(s.cfg.Name+": no terminal for the session", "error", err)
				reply(false)
				continue
			}
			s.pty, s.tty, s.term = m, t, p.Term
			s.win = winsize{p.Cols, p.Rows}
			_ = setWinsize(s.pty, s.win)
			reply(true)
		case "window-change":
			var w struct{ Cols, Rows, Wpx, Hpx uint32 }
			if s.pty != nil && ssh.Unmarshal(req.Payload, &w) == nil {
				s.win = winsize{w.Cols, w.Rows}
				_ = setWinsize(s.pty, s.win)
			}
			reply(false) // window-change wants no reply
		case "env":
			var e struct{ Name, Value string }
			if ssh.Unmarshal(req.Payload, &e) != nil || !acceptedEnv.MatchString(e.Name) {
				reply(false)
				continue
			}
			s.env = append(s.env, e.Name+"="+e.Value)
			reply(true)
		case "shell", "exec":
			var argv []string
			if req.Type == "exec" {
				var e struct{ Command string }
				if ssh.Unmarshal(req.Payload, &e) != nil {
					reply(false)
					continue
				}
				argv = []string{"sh", "-c", e.Command}
			} else {
				argv = []string{"-sh"}
			}
			if s.done != nil {
				reply(false)
				continue
			}
			if err := s.start(argv); err != nil {
				s.log.Info(s.cfg.Name+": start the shell", "error", err)
				reply(false)
				return
			}
			reply(true)
		default:
			// subsystem (sftp), x11-req, auth-agent-req, signal, ...
			reply(false)
		}
	}
}

// start runs argv (argv[0] is the shell's name as it sees it) with the
// session's terminal, or with pipes to the channel without one.
func (s *session) start(argv []string) error {
	cmd := &exec.Cmd{Path: s.cfg.Shell, Args: argv, Env: s.cfg.env(s.term, s.env), Dir: s.cfg.Dir}
	s.done = make(chan struct{})
	var copies sync.WaitGroup
	if s.pty != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = s.tty, s.tty, s.tty
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if err := cmd.Start(); err != nil {
			close(s.done)
			return err
		}
		s.tty.Close()
		s.tty = nil
		go func() { _, _ = io.Copy(s.pty, s.ch) }()
		// Reading the master ends with EIO once no process holds the
		// terminal.
		copies.Go(func() { _, _ = io.Copy(s.ch, s.pty) })
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			close(s.done)
			return err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			close(s.done)
			return err
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			close(s.done)
			return err
		}
		if err := cmd.Start(); err != nil {
			close(s.done)
			return err
		}
		go func() {
			_, _ = io.Copy(stdin, s.ch)
			stdin.Close()
		}()
		copies.Go(func() { _, _ = io.Copy(s.ch, stdout) })
		copies.Go(func() { _, _ = io.Copy(s.ch.Stderr(), stderr) })
	}
	go func() {
		defer close(s.done)
		// Output first: os/exec's Wait closes the pipes' read ends.
		outDone := make(chan struct{})
		go func() { copies.Wait(); close(outDone) }()
		if s.pty == nil {
			<-outDone
		}
		_ = cmd.Wait() // the status is in cmd.ProcessState
		if s.pty != nil {
			// A background job may keep the terminal open: give the
			// output a moment, then end the session (sshd would wait on).
			select {
			case <-outDone:
			case <-time.After(2 * time.Second):
			}
		}
		_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{exitStatus(cmd)}))
		_ = s.ch.CloseWrite()
	}()
	return nil
}

// exitStatus is the shell's exit status, 128+N for a signal N, as a shell
// reports it.
func exitStatus(cmd *exec.Cmd) uint32 {
	if cmd.ProcessState == nil {
		return 255
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + uint32(ws.Signal())
	}
	if code := cmd.ProcessState.ExitCode(); code >= 0 {
		return uint32(code)
	}
	return 255
}
