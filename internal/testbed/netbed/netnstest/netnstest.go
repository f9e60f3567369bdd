// Package netnstest builds throw-away network topologies for tests: network
// namespaces, veth pairs between them, and a real lldpd as the switch at the
// far end. Everything it creates has a name unique to the test and is removed
// by t.Cleanup, also when the test fails. It needs root and iproute2 (and
// lldpd for StartLLDPD); callers skip with RequireRoot first.
package netnstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// RequireRoot skips the test, loudly, unless it runs as root with the
// named programs on PATH.
func RequireRoot(t testing.TB, programs ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: creates network namespaces and veth pairs")
	}
	for _, p := range append([]string{"ip"}, programs...) {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s on PATH (./test.sh installs it): %v", p, err)
		}
	}
}

// ID returns a short random identifier for names that must not collide
// with other tests on the machine. Interface names allow 15 bytes, so it is
// kept to 4 hex digits.
func ID(t testing.TB) string {
	t.Helper()
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// Run runs a command and fails the test with its command line, exit status
// and output if it does not succeed.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Netns is a network namespace created by the test.
type Netns struct {
	Name string
	t    testing.TB
}

// NewNetns creates a network namespace with its loopback up and deletes it
// when the test ends (which also destroys the veths inside it).
func NewNetns(t testing.TB, name string) *Netns {
	t.Helper()
	Run(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", name, err, out)
		}
	})
	Run(t, "ip", "-n", name, "link", "set", "lo", "up")
	return &Netns{Name: name, t: t}
}

// IP runs "ip -n <ns> args...".
func (n *Netns) IP(args ...string) string {
	n.t.Helper()
	return Run(n.t, "ip", append([]string{"-n", n.Name}, args...)...)
}

// Veth creates a veth pair with one end (name) in n and the other (peer)
// in other, and sets both up.
func (n *Netns) Veth(name string, other *Netns, peer string) {
	n.t.Helper()
	n.IP("link", "add", "name", name, "type", "veth", "peer", "name", peer, "netns", other.Name)
	n.IP("link", "set", name, "up")
	other.IP("link", "set", peer, "up")
}

// Do runs fn on an OS thread inside the named network namespace
// (/run/netns/<name>) and waits for it: sockets and devices fn opens stay
// in that namespace. The goroutine holds its thread for fn's whole run, so
// no other goroutine runs in the namespace by accident. Afterwards the
// thread goes back to the caller's namespace and to the scheduler; if it
// cannot, the goroutine exits still locked and the Go runtime ends the
// thread, which fires the Pdeathsig of any child the thread forked (start
// those with qemu.StartLocked's pattern). The one helper of the test bed
// for entering a namespace.
func Do(name string, fn func() error) error {
	target, err := os.Open(filepath.Join("/run/netns", name))
	if err != nil {
		return fmt.Errorf("netns %s: %w", name, err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- fmt.Errorf("the thread's own network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", name, err)
			return
		}
		err = fn()
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// LLDPD is a running lldpd.
type LLDPD struct {
	Dir  string // its socket, configuration and log
	ns   *Netns
	cmd  *exec.Cmd
	logs *bytes.Buffer
}

// StartLLDPD starts lldpd in the namespace on the given interfaces, with a
// private control socket and the given lldpcli configuration lines (which
// should include "configure lldp tx-interval 1" for fast tests). It is
// stopped when the test ends.
func (n *Netns) StartLLDPD(ifaces []string, config []string) *LLDPD {
	n.t.Helper()
	// lldpd runs lldpcli on its configuration as its unprivileged user,
	// which must reach the control socket: t.TempDir is 0700, so use a
	// directory of our own that others may enter.
	dir, err := os.MkdirTemp("", "lldpd-"+n.Name+"-")
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		n.t.Fatal(err)
	}
	conf := filepath.Join(dir, "lldpd.conf")
	if err := os.WriteFile(conf, []byte(strings.Join(config, "\n")+"\n"), 0o644); err != nil {
		n.t.Fatal(err)
	}
	l := &LLDPD{Dir: dir, ns: n, logs: &bytes.Buffer{}}
	// -d: stay in the foreground so we own the process; -I: only our ports;
	// -u: a private control socket, not the machine's; -O: our configuration
	// instead of /etc/lldpd.conf and /etc/lldpd.d.
	l.cmd = exec.Command("ip", "netns", "exec", n.Name, "lldpd", "-d",
		"-I", strings.Join(ifaces, ","), "-u", l.Socket(), "-O", conf)
	l.cmd.Stdout, l.cmd.Stderr = l.logs, l.logs
	if err := l.cmd.Start(); err != nil {
		n.t.Fatalf("starting lldpd: %v", err)
	}
	n.t.Cleanup(func() {
		_ = l.cmd.Process.Signal(unix.SIGTERM)
		done := make(chan struct{})
		go func() { _ = l.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = l.cmd.Process.Kill()
			<-done
		}
		if n.t.Failed() {
			n.t.Logf("lldpd log:\n%s", l.logs)
		}
	})
	return l
}

// Socket is the path of lldpd's control socket.
func (l *LLDPD) Socket() string { return filepath.Join(l.Dir, "lldpd.socket") }

// WaitReady waits until lldpd answers on its control socket and has applied
// its configuration (lldpcli prints the configured system name).
func (l *LLDPD) WaitReady(ctx context.Context, systemName string) error {
	for {
		out, err := exec.CommandContext(ctx, "lldpcli", "-u", l.Socket(), "show", "configuration").CombinedOutput()
		if err == nil && bytes.Contains(out, []byte(systemName)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lldpd did not become ready: %w (last lldpcli output: %s)", ctx.Err(), out)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// FreeTCPPorts returns the first of n consecutive loopback TCP ports that
// were free a moment ago, for a test whose server listens on a port range
// (burnin_network's port, port+1, ...). It needs no root.
func FreeTCPPorts(t testing.TB, n int) int {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := ln.Addr().(*net.TCPAddr).Port
		lns := []net.Listener{ln}
		for i := 1; i < n && err == nil; i++ {
			var l net.Listener
			if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i))); err == nil {
				lns = append(lns, l)
			}
		}
		for _, l := range lns {
			l.Close()
		}
		if err == nil {
			return base
		}
	}
	t.Fatalf("no %d consecutive free TCP ports on 127.0.0.1", n)
	return 0
}

// StartDnsmasq runs Debian's dnsmasq as a DHCP server and router
// advertiser only (no DNS) on iface in the named network namespace, with
// its lease file, PID file and log in a directory of the test's, until the
// test ends, and returns a reader of its log (shown when the test fails).
func StartDnsmasq(t testing.TB, netns, iface string, args ...string) func() string {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "dnsmasq.log")
	dlog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	dns := exec.Command("ip", append([]string{"netns", "exec", netns, "dnsmasq", "--no-daemon", "--conf-file=/dev/null",
		"--port=0", "--bind-interfaces", "--interface=" + iface, "--except-interface=lo",
		"--dhcp-leasefile=" + filepath.Join(dir, "leases"), "--pid-file=" + filepath.Join(dir, "pid"),
		"--log-dhcp", "--log-facility=" + logPath}, args...)...)
	if err := dns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dns.Process.Kill()
		_ = dns.Wait()
		if t.Failed() {
			t.Logf("dnsmasq:\n%s", dlog())
		}
	})
	return dlog
}
