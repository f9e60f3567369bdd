package qemu

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// VM is a running QEMU.
type VM struct {
	Machine Machine
	Cmdline []string
	LogPath string
	start   time.Time
	cmd     *exec.Cmd
	done    chan struct{}
	err     error

	// stdin is QEMU's standard input, the serial port's receive side,
	// with Options.ConsoleInput.
	stdin io.WriteCloser

	// watchReset: QEMU traces its shutdown requests (Machine.Args), so
	// an exit without one is the guest's reset (GuestReset).
	watchReset bool
	killed     bool // guarded by mu: Kill ended it
	shutdown   bool // guarded by mu: the console had the shutdown trace

	mu      sync.Mutex
	lines   []Line
	tail    string // the line being written, not ended yet: a prompt
	waiters []*waiter
	plugs   int // paths plugged back (PlugPath), for their drives' ids
}

// Line is one line of the serial console.
type Line struct {
	At   time.Duration // since QEMU started
	Text string
}

type waiter struct {
	match func(string) bool
	ch    chan Line
}

// Options for Start.
type Options struct {
	// Relay builds the guestfwd command for a host target; default
	// RelayCommand (the running binary must call MaybeRelay first thing).
	Relay func(target string) string
	// Tap is the tap device file for a NIC with backend "fd", or the
	// stream socket for one with backend "stream" (see StartTrunk).
	Tap *os.File
	// Echo receives the serial console as it comes (e.g. t.Log lines).
	Echo func(Line)
	// ConsoleInput lets VM.Type write to the serial console.
	ConsoleInput bool
	// Netns runs QEMU (and StartIPMISim's ipmi_sim) inside that network
	// namespace (a name under /run/netns): its slirp NICs, chardev
	// sockets and the BMC's LAN channel are the namespace's. Empty: this
	// process's namespace.
	Netns string
}

// Start boots m. The serial console goes to m.Dir/serial.log, each line
// prefixed with the seconds since QEMU started.
func Start(ctx context.Context, m Machine, opts Options) (*VM, error) {
	if m.Dir == "" {
		return nil, errors.New("qemu: Machine.Dir is empty")
	}
	if strings.Contains(m.Dir, ",") {
		return nil, fmt.Errorf("qemu: %s: QEMU option values cannot hold the directory's comma", m.Dir)
	}
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("qemu: %w", err)
	}
	if err := m.CreateDisks(); err != nil {
		return nil, err
	}
	if m.Firmware == UEFI {
		// The machine's NVRAM, like its disks, lasts across its boots:
		// boot entries an OS wrote are there the next time.
		vars := m.VarsPath()
		if _, err := os.Stat(vars); err != nil {
			_, template := m.firmwareFiles()
			if err := CopyFile(template, vars); err != nil {
				return nil, fmt.Errorf("qemu: UEFI variables (install ovmf, or qemu-efi-aarch64 for arm64): %w", err)
			}
		}
		if m.SecureBoot {
			if err := SetSecureBootEnable(vars, !m.SecureBootDisabled); err != nil {
				return nil, err
			}
		}
	}
	relay := opts.Relay
	if relay == nil {
		relay = RelayCommand
	}
	tapFD := -1
	if opts.Tap != nil {
		tapFD = 3
	}
	args, err := m.Args(relay, tapFD)
	if err != nil {
		return nil, err
	}
	vm := &VM{Machine: m, Cmdline: append([]string{m.Binary()}, args...), LogPath: filepath.Join(m.Dir, "serial.log"), done: make(chan struct{}),
		watchReset: true}
	if err := os.WriteFile(filepath.Join(m.Dir, "qemu.cmdline"), []byte(ShellQuote(vm.Cmdline)+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("qemu: %w", err)
	}
	logf, err := os.Create(vm.LogPath)
	if err != nil {
		return nil, fmt.Errorf("qemu: %w", err)
	}
	cmd := InNetns(opts.Netns, vm.Cmdline[0], args...)
	if opts.Tap != nil {
		cmd.ExtraFiles = []*os.File{opts.Tap}
	}
	for _, n := range m.NICs {
		if n.File != nil {
			cmd.ExtraFiles = append(cmd.ExtraFiles, n.File)
		}
	}
	// Its own process group, so stopping it never signals the test.
	// Pdeathsig: no QEMU outlives a test binary that dies or is killed
	// (started by StartLocked, or a test's ended thread would kill it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.Stdin = nil
	if opts.ConsoleInput {
		if vm.stdin, err = cmd.StdinPipe(); err != nil {
			logf.Close()
			return nil, fmt.Errorf("qemu: %w", err)
		}
	}
	vm.start = time.Now()
	waited, err := StartLocked(cmd)
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("qemu: start %s: %w", vm.Cmdline[0], err)
	}
	vm.cmd = cmd
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer logf.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
			n, line, err := bufio.ScanLines(data, atEOF)
			tail := ""
			if line == nil {
				tail = string(data)
			}
			vm.mu.Lock()
			vm.tail = tail
			vm.mu.Unlock()
			return n, line, err
		})
		for sc.Scan() {
			l := Line{At: time.Since(vm.start), Text: strings.TrimRight(sc.Text(), "\r")}
			fmt.Fprintf(logf, "%8.3f %s\n", l.At.Seconds(), l.Text)
			if opts.Echo != nil {
				opts.Echo(l)
			}
			vm.add(l)
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		err := <-waited
		pw.Close()
		<-readDone
		if err != nil {
			vm.err = fmt.Errorf("qemu: %s: %w (serial console in %s)", vm.Cmdline[0], err, vm.LogPath)
		} else if l, ok := vm.Find("Kernel panic"); ok {
			// panic=-1 with -no-reboot makes a guest panic a clean QEMU exit.
			vm.err = fmt.Errorf("qemu: guest kernel panic at %.1fs: %s (serial console in %s)", l.At.Seconds(), l.Text, vm.LogPath)
		}
		close(vm.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			vm.Kill()
		case <-vm.done:
		}
	}()
	return vm, nil
}

func (vm *VM) add(l Line) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	vm.lines = append(vm.lines, l)
	if strings.Contains(l.Text, shutdownTrace) {
		vm.shutdown = true
	}
	kept := vm.waiters[:0]
	for _, w := range vm.waiters {
		if w.match(l.Text) {
			w.ch <- l
			continue
		}
		kept = append(kept, w)
	}
	vm.waiters = kept
}

// Find returns the first console line holding s so far.
func (vm *VM) Find(s string) (Line, bool) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	for _, l := range vm.lines {
		if strings.Contains(l.Text, s) {
			return l, true
		}
	}
	return Line{}, false
}

// Tail returns the console's last line so far if it has not ended: a
// prompt that waits for input ("Password: "), which Lines does not hold
// until the line ends.
func (vm *VM) Tail() string {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.tail
}

// Lines returns the console so far.
func (vm *VM) Lines() []Line {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return append([]Line(nil), vm.lines...)
}

// WaitFor waits for a console line holding s (also one already seen).
func (vm *VM) WaitFor(ctx context.Context, s string) (Line, error) {
	match := func(t string) bool { return strings.Contains(t, s) }
	vm.mu.Lock()
	for _, l := range vm.lines {
		if match(l.Text) {
			vm.mu.Unlock()
			return l, nil
		}
	}
	w := &waiter{match: match, ch: make(chan Line, 1)}
	vm.waiters = append(vm.waiters, w)
	vm.mu.Unlock()
	select {
	case l := <-w.ch:
		return l, nil
	case <-vm.done:
		select {
		case l := <-w.ch:
			return l, nil
		default:
		}
		return Line{}, fmt.Errorf("qemu: QEMU exited before the console said %q (serial console in %s)", s, vm.LogPath)
	case <-ctx.Done():
		return Line{}, fmt.Errorf("qemu: waiting for %q on the console: %w (serial console in %s)", s, ctx.Err(), vm.LogPath)
	}
}

// Type sends text to the serial console, as typed on its terminal (a
// newline is the Enter key); the machine must have been started with
// Options.ConsoleInput.
func (vm *VM) Type(text string) error {
	if vm.stdin == nil {
		return errors.New("qemu: Type: the VM was started without Options.ConsoleInput")
	}
	if _, err := io.WriteString(vm.stdin, strings.ReplaceAll(text, "\n", "\r")); err != nil {
		return fmt.Errorf("qemu: serial console input: %w", err)
	}
	return nil
}

// Wait waits for QEMU to exit (the guest powered off).
func (vm *VM) Wait(ctx context.Context) error {
	select {
	case <-vm.done:
		return vm.err
	case <-ctx.Done():
		vm.Kill()
		<-vm.done
		return fmt.Errorf("qemu: VM still running: %w (serial console in %s)", ctx.Err(), vm.LogPath)
	}
}

// Exited says, without waiting, whether QEMU has exited and with what
// error (nil: the guest powered off): a guest that stops answering may
// be gone.
func (vm *VM) Exited() (bool, error) {
	select {
	case <-vm.done:
		return true, vm.err
	default:
		return false, nil
	}
}

// Elapsed is the time since QEMU started.
func (vm *VM) Elapsed() time.Duration { return time.Since(vm.start) }

// GuestReset says whether QEMU exited because the guest reset the
// machine (a reboot, a firmware's own reset), which -no-reboot turns into
// an exit: it exited by itself, with no shutdown request (a power-off,
// ACPI's or the guest's) and no kernel panic on the console. A BMC keeps
// such a machine powered and boots it again, as hardware does. False while
// QEMU runs, after Kill, and for a StandIn.
func (vm *VM) GuestReset() bool {
	select {
	case <-vm.done:
	default:
		return false
	}
	if !vm.watchReset {
		return false
	}
	vm.mu.Lock()
	killed, shutdown := vm.killed, vm.shutdown
	vm.mu.Unlock()
	if _, panicked := vm.Find("Kernel panic"); killed || shutdown || panicked || vm.err != nil {
		return false
	}
	return true
}

// Kill stops QEMU (SIGTERM to its own process group, then SIGKILL).
func (vm *VM) Kill() {
	if vm.cmd == nil || vm.cmd.Process == nil {
		return
	}
	select {
	case <-vm.done:
		return
	default:
	}
	vm.mu.Lock()
	vm.killed = true
	vm.mu.Unlock()
	_ = syscall.Kill(-vm.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-vm.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-vm.cmd.Process.Pid, syscall.SIGKILL)
		<-vm.done
	}
}

// Done is closed when QEMU has exited.
func (vm *VM) Done() <-chan struct{} { return vm.done }

// StandIn wraps cmd, a started process that stands for QEMU in a test of
// code that starts VMs (a BMC simulator's power-on), as a VM of m: killed
// like one, and done when cmd exits.
func StandIn(m Machine, cmd *exec.Cmd) *VM {
	vm := &VM{Machine: m, cmd: cmd, done: make(chan struct{}), start: time.Now()}
	go func() { _ = cmd.Wait(); close(vm.done) }()
	return vm
}

// InNetns is the command name args, run inside network namespace ns by
// ip-netns-exec(8) (which execs it: the PID is the program's) when ns is
// set.
func InNetns(ns, name string, args ...string) *exec.Cmd {
	if ns == "" {
		return exec.Command(name, args...)
	}
	return exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// CopyFile copies the file src to dst (mode 0644).
func CopyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// ShellQuote joins args into one line a shell would split back into args.
func ShellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@+", r))
		}) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// Monitor runs one command of QEMU's human monitor (Machine.Monitor must
// be set) and returns its output, without the command's echo: "set_link
// n1 off" pulls the second NIC's cable, which the guest sees as a carrier
// loss.
func (vm *VM) Monitor(ctx context.Context, command string) (string, error) {
	if vm.Machine.Monitor == "" {
		return "", errors.New("qemu: the machine has no monitor socket (Machine.Monitor)")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", vm.Machine.Monitor)
	// QEMU listens again only once it has closed the previous client, so
	// a refusal right after one is retried for a few seconds.
	for try := 0; err != nil && errors.Is(err, syscall.ECONNREFUSED) && try < 50; try++ {
		time.Sleep(100 * time.Millisecond)
		c, err = d.DialContext(ctx, "unix", vm.Machine.Monitor)
	}
	if err != nil {
		return "", fmt.Errorf("qemu: monitor: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	}
	// The monitor greets with its banner and a "(qemu) " prompt, and
	// prompts again when the command is done.
	r := bufio.NewReader(c)
	readPrompt := func() (string, error) {
		var b strings.Builder
		for !strings.HasSuffix(b.String(), "(qemu) ") {
			ch, err := r.ReadByte()
			if err != nil {
				return b.String(), fmt.Errorf("qemu: monitor: %w", err)
			}
			b.WriteByte(ch)
		}
		return b.String(), nil
	}
	if _, err := readPrompt(); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, command+"\n"); err != nil {
		return "", fmt.Errorf("qemu: monitor %q: %w", command, err)
	}
	out, err := readPrompt()
	// The monitor echoes the command, with the line editor's escape
	// sequences, on the first line; the command's own output follows.
	if _, rest, ok := strings.Cut(out, "\n"); ok {
		out = rest
	}
	return strings.ReplaceAll(strings.TrimSuffix(out, "(qemu) "), "\r", ""), err
}

// multipathDisk returns the disk id of the machine if it has paths.
func (vm *VM) multipathDisk(id string, i int) (Disk, error) {
	for _, d := range vm.Machine.Disks {
		if d.ID == id {
			if d.Kind != "scsi-hd" || d.Paths < 2 || i < 0 || i >= d.Paths {
				return Disk{}, fmt.Errorf("qemu: disk %s (%s, %d paths) has no path %d", id, d.Kind, d.Paths, i)
			}
			return d, nil
		}
	}
	return Disk{}, fmt.Errorf("qemu: no disk %s", id)
}

// UnplugPath hot-unplugs path i of the multipath disk id (Disk.Paths): the
// guest sees that SCSI device removed, as when a cable, a switch port or
// an HBA fails. Machine.Monitor must be set.
func (vm *VM) UnplugPath(ctx context.Context, disk string, i int) error {
	if _, err := vm.multipathDisk(disk, i); err != nil {
		return err
	}
	out, err := vm.Monitor(ctx, "device_del "+pathDeviceID(disk, i))
	if err == nil && strings.TrimSpace(out) != "" {
		err = fmt.Errorf("qemu: device_del %s: %s", pathDeviceID(disk, i), strings.TrimSpace(out))
	}
	return err
}

// PlugPath plugs path i of the multipath disk id back after UnplugPath: a
// new drive on the disk's file and the same SCSI device (target, serial,
// WWN), which the guest sees appear, as a path coming back.
func (vm *VM) PlugPath(ctx context.Context, disk string, i int) error {
	d, err := vm.multipathDisk(disk, i)
	if err != nil {
		return err
	}
	vm.mu.Lock()
	vm.plugs++
	// QEMU deletes the unplugged device's drive later, not at once: the
	// new one gets an id of its own.
	id := fmt.Sprintf("d-%s-%d-plug%d", disk, i, vm.plugs)
	vm.mu.Unlock()
	for _, c := range []string{"drive_add 0 " + vm.Machine.pathDrive(d, id), "device_add " + vm.Machine.pathDevice(d, i, id, "")} {
		for try := 0; ; try++ {
			out, err := vm.Monitor(ctx, c)
			if err != nil {
				return err
			}
			out = strings.TrimSpace(out)
			if out == "" || out == "OK" {
				break
			}
			// The unplugged device keeps its id until the guest has let
			// it go.
			if !strings.Contains(out, "Duplicate") || try == 20 {
				return fmt.Errorf("qemu: %s: %s", c, out)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	return nil
}
