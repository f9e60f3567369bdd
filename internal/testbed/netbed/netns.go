package netbed

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// Netns is a network namespace the test created, holding a tap device whose
// other end is QEMU (the tap file is handed to QEMU as a file descriptor,
// so QEMU itself stays in the test's namespace and keeps its slirp
// forwards on the host's loopback).
type Netns struct {
	Name  string
	Tap   string
	File  *os.File // the tap; pass as Options.Tap
	dir   string
	state string // lldpd's socket and configuration
	peer  *exec.Cmd
	// peerDone has lldpd's exit (startLocked).
	peerDone <-chan error
}

func ip(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "ip", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// NewNetns creates namespace name with lo up and a tap device tap (MAC mac)
// in it, opened for QEMU. Needs root. Close removes it all.
func NewNetns(ctx context.Context, name, tap, mac, dir string) (*Netns, error) {
	if err := ip(ctx, "netns", "add", name); err != nil {
		return nil, err
	}
	n := &Netns{Name: name, Tap: tap, dir: dir}
	fail := func(err error) (*Netns, error) { n.Close(); return nil, err }
	if err := ip(ctx, "-n", name, "link", "set", "lo", "up"); err != nil {
		return fail(err)
	}
	f, err := openTap(name, tap)
	if err != nil {
		return fail(err)
	}
	n.File = f
	// A fixed MAC: lldpd sends it as the chassis ID.
	if err := ip(ctx, "-n", name, "link", "set", tap, "address", mac); err != nil {
		return fail(err)
	}
	if err := ip(ctx, "-n", name, "link", "set", tap, "up"); err != nil {
		return fail(err)
	}
	return n, nil
}

// openTap creates a tap device inside namespace ns and returns its file.
// The device lives as long as the file is open (it is not persistent).
func openTap(ns, name string) (*os.File, error) {
	var f *os.File
	err := netnstest.Do(ns, func() (err error) {
		f, err = tunOpen(name)
		return err
	})
	return f, err
}

// Dialer connects from inside namespace ns: an http.Transport's
// DialContext for a client that reaches what only the namespace reaches
// (a guest's agent API on a provisioning network).
func Dialer(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		err = netnstest.Do(ns, func() error {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

func tunOpen(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	var req struct {
		name  [unix.IFNAMSIZ]byte
		flags uint16
		_     [22]byte
	}
	copy(req.name[:], name)
	req.flags = unix.IFF_TAP | unix.IFF_NO_PI
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req))); e != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, e)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}

// LLDPPeer describes what the lldpd in the namespace announces.
type LLDPPeer struct {
	SystemName  string
	Description string
	PortID      string // local port ID subtype
	PortDescr   string
	Extra       []string // more lldpcli lines (custom TLVs)
}

// StartLLDPD runs Debian's lldpd in the namespace on the tap only, with a
// private control socket and configuration, sending every second.
//
// lldpd applies its configuration by running lldpcli as its unprivileged
// _lldpd user, which must reach the control socket; under a test's
// directory (mode 0700) lldpd would start but silently ignore the
// configuration. So the socket and configuration live in a directory of
// their own, mode 0755, removed by Close; only the log goes to dir.
func (n *Netns) StartLLDPD(ctx context.Context, p LLDPPeer) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	// lldpd drops to its own user, whose configuration client must reach
	// the control socket: a directory of its own that it can enter (a test's
	// temporary directories are 0700).
	st, err := os.MkdirTemp("", "vmtest-lldpd-")
	if err != nil {
		return err
	}
	if err := os.Chmod(st, 0o755); err != nil {
		os.RemoveAll(st)
		return err
	}
	n.state = st
	conf := filepath.Join(st, "lldpd.conf")
	c := fmt.Sprintf(`configure system hostname %q
configure system description %q
configure lldp tx-interval 1
configure lldp tx-hold 30
configure ports %s lldp portidsubtype local %s description %q
`, p.SystemName, p.Description, n.Tap, p.PortID, p.PortDescr) + strings.Join(p.Extra, "\n") + "\n"
	if err := os.WriteFile(conf, []byte(c), 0o644); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(n.dir, "lldpd.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	// -d: foreground, so we keep its PID; -I: only the tap; -u/-O: our own
	// socket and configuration, nothing of the host's lldpd.
	cmd := exec.Command("ip", "netns", "exec", n.Name, "lldpd", "-d", "-I", n.Tap,
		"-u", filepath.Join(st, "lldpd.socket"), "-O", conf)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true, Pdeathsig: unix.SIGKILL}
	waited, err := qemu.StartLocked(cmd)
	if err != nil {
		return fmt.Errorf("start lldpd: %w", err)
	}
	n.peer, n.peerDone = cmd, waited
	return nil
}

// Close stops lldpd, closes the tap and deletes the namespace.
func (n *Netns) Close() {
	if n.peer != nil && n.peer.Process != nil {
		_ = unix.Kill(-n.peer.Process.Pid, unix.SIGTERM)
		done := make(chan struct{})
		go func() { <-n.peerDone; close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = unix.Kill(-n.peer.Process.Pid, unix.SIGKILL)
			<-done
		}
		n.peer, n.peerDone = nil, nil
	}
	if n.File != nil {
		n.File.Close()
		n.File = nil
	}
	_ = ip(context.Background(), "netns", "del", n.Name)
	if n.state != "" {
		os.RemoveAll(n.state)
		n.state = ""
	}
}
