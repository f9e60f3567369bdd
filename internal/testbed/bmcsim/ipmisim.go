package bmcsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// Boot devices of an IPMISim, as Ironic's ipmitool management names them
// (ipmi_sim's own names are in parseControl).
const (
	BootNone  = "none"  // no override: the machine as configured
	BootPXE   = "pxe"   // the network: the NICs with PXE (Machine.NetBoot), else Machine.Kernel and Initrd as a stand-in
	BootDisk  = "disk"  // the disks: no kernel, no CD, the firmware's own order
	BootCDROM = "cdrom" // Machine.ISO
)

// IPMISim is OpenIPMI's ipmi_sim acting as a machine's BMC: a LAN channel
// (RMCP and RMCP+) on the Machine's BMC address for Ironic's ipmitool, and
// the KCS system interface inside the guest through QEMU's ipmi-bmc-extern.
// The BMC holds the power: a power-on over IPMI starts QEMU, a power-off
// kills it, a guest that powers off is off. Each power-on boots what the
// BMC's boot device says.
//
// ipmi_sim only runs programs for chassis control (power, reset, boot
// device) and for the LAN parameters it cannot know (address, MAC); both
// are the running binary again (see MaybeRelay), which hands the request
// over a Unix socket to this process. So QEMU is a child of the test, with
// its console in a VM value and gone when the test process dies.
type IPMISim struct {
	machine qemu.Machine
	opts    qemu.Options
	ctx     context.Context
	cancel  context.CancelFunc
	proc    *exec.Cmd
	procErr chan error
	ln      net.Listener
	served  chan struct{}

	// machinePower's mu also guards appendArgs and boot.
	machinePower
	appendArgs string
	boot       string
}

// StartIPMISim starts ipmi_sim as the BMC of m (m.BMC.Kind BMCOpenIPMI),
// powered off. Its configuration, state and log are in m.Dir/bmc; ctx
// bounds the BMC and every VM it starts. Close stops both. The running
// binary must call MaybeRelay first thing: it is the control program.
func StartIPMISim(ctx context.Context, m qemu.Machine, opts qemu.Options) (*IPMISim, error) {
	if m.BMC == nil || m.BMC.Kind != qemu.BMCOpenIPMI {
		return nil, fmt.Errorf("bmcsim: StartIPMISim needs Machine.BMC of kind %s", qemu.BMCOpenIPMI)
	}
	if m.Dir == "" {
		return nil, errors.New("bmcsim: Machine.Dir is empty")
	}
	conf, err := ipmiSimConfig(m)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(m.Dir, "bmc")
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, fmt.Errorf("bmcsim: %w", err)
	}
	sock := filepath.Join(dir, "control.sock")
	// sun_path holds 108 bytes with its terminating NUL.
	if len(sock) > 107 {
		return nil, fmt.Errorf("bmcsim: BMC control socket %s: path longer than a Unix socket address allows", sock)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bmcsim: the BMC's control program: %w", err)
	}
	for _, p := range []string{self, sock} {
		if strings.ContainsAny(p, "\"' \t\n\\$`") {
			return nil, fmt.Errorf("bmcsim: %q: ipmi_sim runs its programs through a shell; use a path without quotes, blanks or shell characters", p)
		}
	}
	control := self + " " + BMCControlArg + " " + sock
	if err := os.WriteFile(filepath.Join(dir, "lan.conf"), []byte(conf.lan(control)), 0o600); err != nil {
		return nil, fmt.Errorf("bmcsim: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sim.emu"), []byte(conf.emu()), 0o600); err != nil {
		return nil, fmt.Errorf("bmcsim: %w", err)
	}
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("bmcsim: BMC control socket: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &IPMISim{machine: m, opts: opts, ctx: ctx, cancel: cancel, ln: ln, served: make(chan struct{}),
		appendArgs: m.Append, boot: BootNone, procErr: make(chan error, 1)}
	go s.serve()

	logf, err := os.Create(filepath.Join(dir, "ipmi_sim.log"))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("bmcsim: %w", err)
	}
	// -n: no command console on stdin; -s: persistent state (users, LAN
	// parameters, SEL) here, not below /var.
	cmd := qemu.InNetns(opts.Netns, "ipmi_sim", "-n", "-c", filepath.Join(dir, "lan.conf"), "-f", filepath.Join(dir, "sim.emu"), "-s", state)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The control program is this binary; built with -race, it would
	// sleep 1 s at every exit, and ipmi_sim waits for it.
	cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	waited, err := qemu.StartLocked(cmd)
	if err != nil {
		logf.Close()
		s.Close()
		return nil, fmt.Errorf("bmcsim: start ipmi_sim (Debian package openipmi): %w", err)
	}
	s.proc = cmd
	go func() {
		err := <-waited
		logf.Close()
		s.procErr <- err
	}()
	if err := s.waitLAN(ctx, 10*time.Second); err != nil {
		s.Close()
		return nil, fmt.Errorf("bmcsim: ipmi_sim did not answer on %s (log %s): %w", m.BMC.LANAddr(), logf.Name(), err)
	}
	return s, nil
}

// waitLAN sends RMCP presence pings to the LAN channel until one is
// answered: the sign that ipmi_sim has read its configuration.
func (s *IPMISim) waitLAN(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var c net.Conn
	var err error
	if ns := s.opts.Netns; ns != "" {
		err = netnstest.Do(ns, func() (err error) { c, err = net.Dial("udp", s.machine.BMC.LANAddr()); return err })
	} else {
		c, err = net.Dial("udp", s.machine.BMC.LANAddr())
	}
	if err != nil {
		return err
	}
	defer c.Close()
	// RMCP version 6, sequence 0xff (no ACK), class ASF; ASF IANA 4542,
	// message type presence ping, tag 0, no data.
	ping := []byte{0x06, 0x00, 0xff, 0x06, 0x00, 0x00, 0x11, 0xbe, 0x80, 0x00, 0x00, 0x00}
	buf := make([]byte, 512)
	for {
		select {
		case err := <-s.procErr:
			s.procErr <- err
			return fmt.Errorf("ipmi_sim exited: %v", err)
		default:
		}
		// Until ipmi_sim has bound the port, the write may fail with the
		// ICMP refusal of the previous ping; the next round retries.
		_, _ = c.Write(ping)
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, err := c.Read(buf); err == nil && n > 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Close powers the machine off and stops ipmi_sim; its state directory is
// removed (the logs stay in m.Dir/bmc).
func (s *IPMISim) Close() {
	s.cancel()
	s.ln.Close()
	<-s.served
	s.mu.Lock()
	vm := s.vm
	s.mu.Unlock()
	if vm != nil {
		vm.Kill()
	}
	if s.proc != nil {
		_ = syscall.Kill(-s.proc.Process.Pid, syscall.SIGTERM)
		var err error
		select {
		case err = <-s.procErr:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-s.proc.Process.Pid, syscall.SIGKILL)
			err = <-s.procErr
		}
		s.procErr <- err // for a second Close
	}
	_ = os.RemoveAll(filepath.Join(s.machine.Dir, "bmc", "state"))
	_ = os.Remove(filepath.Join(s.machine.Dir, "bmc", "control.sock"))
}

// SetKernelArgs sets the kernel command line of the next network boot:
// what Ironic's PXE configuration would hand the ramdisk.
func (s *IPMISim) SetKernelArgs(append string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appendArgs = append
}

// BootDevice is the boot device the next power-on uses.
func (s *IPMISim) BootDevice() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.boot
}

// bootMachine is the machine a power-on with boot device dev starts.
func (s *IPMISim) bootMachine(dev string) (qemu.Machine, error) {
	m := s.machine
	m.Append = s.appendArgs
	switch dev {
	case BootNone:
	case BootPXE:
		if slices.ContainsFunc(m.NICs, func(n qemu.NIC) bool { return n.PXE }) {
			m.Kernel, m.Initrd, m.ISO, m.NetBoot = "", "", "", true
			break
		}
		if m.Kernel == "" {
			return m, errors.New("network boot: the machine has no kernel to stand in for PXE")
		}
		m.ISO = ""
	case BootDisk:
		m.Kernel, m.Initrd, m.ISO = "", "", ""
	case BootCDROM:
		if m.ISO == "" {
			return m, errors.New("CD boot: the machine has no ISO")
		}
	default:
		return m, fmt.Errorf("boot device %q is not simulated", dev)
	}
	return m, nil
}

func (s *IPMISim) powerOnLocked(from string) error {
	if s.onLocked() {
		return nil
	}
	if err := s.ctx.Err(); err != nil {
		return err
	}
	m, err := s.bootMachine(s.boot)
	if err != nil {
		return err
	}
	return s.startLocked(s.ctx, m, s.opts, qemu.Start, fmt.Sprintf("power on by %s (boot %s)", from, s.boot),
		func() (qemu.Machine, error) { return s.bootMachine(s.boot) })
}

// serve answers the control program, one request per connection.
func (s *IPMISim) serve() {
	defer close(s.served)
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.handle(c)
	}
}

// controlReply is what the control program prints for ipmi_sim to parse
// (Out), or why it fails (Err: printed too, for ipmi_sim's log, with exit
// status 1).
type controlReply struct {
	Out string `json:"out,omitempty"`
	Err string `json:"err,omitempty"`
}

func (s *IPMISim) handle(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	var args []string
	var reply controlReply
	if err := json.NewDecoder(io.LimitReader(c, 64<<10)).Decode(&args); err != nil {
		reply.Err = "bad request: " + err.Error()
	} else if req, err := parseControl(args); err != nil {
		reply.Err = err.Error()
	} else if out, err := s.do(req); err != nil {
		reply.Err = err.Error()
	} else {
		reply.Out = out
	}
	_ = json.NewEncoder(c).Encode(reply)
}

// do carries out one request and returns ipmi_sim's "name:value" lines.
func (s *IPMISim) do(req controlRequest) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.machine.BMC
	var out strings.Builder
	for _, p := range req.get {
		var v string
		switch p {
		case "power":
			v = map[bool]string{false: "0", true: "1"}[s.onLocked()]
		case "boot":
			v = map[string]string{BootNone: "none", BootPXE: "pxe", BootDisk: "default", BootCDROM: "cdrom"}[s.boot]
		case "ip_addr":
			v = b.LANAddress
		case "ip_addr_src":
			v = "static"
		case "mac_addr":
			v = b.LANMAC
		case "subnet_mask":
			v = b.SubnetMask()
		case "default_gw_ip_addr", "backup_gw_ip_addr":
			v = "0.0.0.0"
		case "default_gw_mac_addr", "backup_gw_mac_addr":
			v = "00:00:00:00:00:00"
		}
		fmt.Fprintf(&out, "%s:%s\n", p, v)
	}
	for _, kv := range req.set {
		switch kv[0] {
		case "power":
			if kv[1] == "1" {
				if err := s.powerOnLocked("IPMI"); err != nil {
					return "", err
				}
			} else {
				s.powerOffLocked("IPMI")
			}
		case "reset":
			// A hard reset: the next boot reads the boot device again,
			// which QEMU's own reset would not.
			s.powerOffLocked("IPMI reset")
			if err := s.powerOnLocked("IPMI reset"); err != nil {
				return "", err
			}
		case "shutdown":
			// No ACPI button from here: a soft power-off is a hard one.
			s.powerOffLocked("IPMI soft shutdown")
		case "boot":
			s.boot = kv[1]
			s.events = append(s.events, "boot device "+kv[1])
		default:
			// LAN parameters: the LAN address is what the harness was
			// given, a change is accepted and not applied.
			s.events = append(s.events, fmt.Sprintf("LAN %s %s ignored", kv[0], kv[1]))
		}
	}
	return out.String(), nil
}

// controlRequest is one run of the control program: ipmi_sim's
// "<prog> get NAME..." or "<prog> set NAME VALUE [NAME VALUE...]" (and
// "check", which only the LAN program gets).
type controlRequest struct {
	get []string
	set [][2]string
}

// parseControl reads the arguments ipmi_sim gave the control program after
// the socket path: "chassis" or "lan", the operation, its parameters.
func parseControl(args []string) (controlRequest, error) {
	var r controlRequest
	if len(args) < 2 {
		return r, fmt.Errorf("want chassis|lan get|set|check ..., got %q", args)
	}
	kind, op, params := args[0], args[1], args[2:]
	var known map[string]bool
	switch kind {
	case "chassis":
		known = map[string]bool{"power": true, "reset": true, "boot": true, "shutdown": true}
	case "lan":
		known = map[string]bool{"ip_addr": true, "ip_addr_src": true, "mac_addr": true, "subnet_mask": true,
			"default_gw_ip_addr": true, "default_gw_mac_addr": true, "backup_gw_ip_addr": true, "backup_gw_mac_addr": true}
	default:
		return r, fmt.Errorf("unknown control program kind %q", kind)
	}
	switch op {
	case "get":
		for _, p := range params {
			if !known[p] || p == "reset" || p == "shutdown" {
				return r, fmt.Errorf("%s get: unknown parameter %q", kind, p)
			}
			r.get = append(r.get, p)
		}
	case "set", "check":
		if len(params)%2 != 0 {
			return r, fmt.Errorf("%s %s: parameter %q without a value", kind, op, params[len(params)-1])
		}
		for i := 0; i < len(params); i += 2 {
			p, v := params[i], params[i+1]
			if !known[p] {
				return r, fmt.Errorf("%s %s: unknown parameter %q", kind, op, p)
			}
			switch p {
			case "power", "reset", "shutdown":
				if v != "0" && v != "1" {
					return r, fmt.Errorf("%s %s: %s %q: want 0 or 1", kind, op, p, v)
				}
			case "boot":
				// ipmi_sim's names for the boot device selector: 2, "force
				// boot from default hard drive", is "default".
				dev, ok := map[string]string{"none": BootNone, "pxe": BootPXE, "default": BootDisk, "cdrom": BootCDROM}[v]
				if !ok {
					return r, fmt.Errorf("%s %s: boot device %q is not simulated", kind, op, v)
				}
				v = dev
			}
			if op == "set" {
				r.set = append(r.set, [2]string{p, v})
			}
		}
	default:
		return r, fmt.Errorf("%s: unknown operation %q", kind, op)
	}
	return r, nil
}

// BMCControlArg is the first argument that makes a binary the BMC's
// control program (see qemu.MaybeRelay). The value is unchanged from the
// package's first home: ipmi_sim configurations written by a running test
// name it.
const BMCControlArg = "-vmtest-bmc-control"

func init() {
	qemu.RegisterHelper(BMCControlArg, func(args []string) int {
		if len(args) < 1 {
			fmt.Fprintln(os.Stderr, "usage: "+BMCControlArg+" SOCKET ARGS...")
			return 2
		}
		return bmcControl(args[0], args[1:])
	})
}

// bmcControl is the control program: it passes its arguments to the
// IPMISim listening on sock and prints the answer.
func bmcControl(sock string, args []string) int {
	fail := func(err error) int {
		// ipmi_sim logs what the program printed when it fails.
		fmt.Fprintf(os.Stdout, "bmcsim BMC control %q: %v\n", args, err)
		return 1
	}
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	if err := json.NewEncoder(c).Encode(args); err != nil {
		return fail(err)
	}
	var reply controlReply
	if err := json.NewDecoder(c).Decode(&reply); err != nil {
		return fail(err)
	}
	if reply.Err != "" {
		return fail(errors.New(reply.Err))
	}
	fmt.Fprint(os.Stdout, reply.Out)
	return 0
}

// ipmiSimConf is what ipmi_sim is told.
type ipmiSimConf struct {
	name           string
	lanAddr        netip.AddrPort
	vmPort         int
	user, password string
	mfgID          uint32
	productID      uint16
}

func ipmiSimConfig(m qemu.Machine) (ipmiSimConf, error) {
	b := m.BMC
	c := ipmiSimConf{name: "vmtest", vmPort: b.VMPort, user: b.User, password: b.Password, mfgID: b.MfgID, productID: b.ProductID}
	a, err := netip.ParseAddr(b.LANAddress)
	if err != nil || !a.Is4() {
		return c, fmt.Errorf("bmcsim: BMC LAN address %q: want an IPv4 address (a loopback one, 127.x.y.z, needs no set-up)", b.LANAddress)
	}
	if b.LANPort <= 0 || b.LANPort > 65535 || b.VMPort <= 0 || b.VMPort > 65535 {
		return c, fmt.Errorf("bmcsim: BMC ports %d (LAN) and %d (VM): want 1-65535", b.LANPort, b.VMPort)
	}
	c.lanAddr = netip.AddrPortFrom(a, uint16(b.LANPort))
	if _, err := net.ParseMAC(b.LANMAC); err != nil || len(b.LANMAC) != 17 {
		return c, fmt.Errorf("bmcsim: BMC LAN MAC %q: want xx:xx:xx:xx:xx:xx", b.LANMAC)
	}
	for _, v := range []string{b.User, b.Password} {
		// IPMI 2.0: at most 16 bytes (20 with RMCP+, which ipmi_sim's
		// 1.5 side cannot hold); ipmi_sim's parser takes no quotes.
		if v == "" || len(v) > 16 || strings.ContainsAny(v, "\"\\ \t\n#") {
			return c, fmt.Errorf("bmcsim: BMC user or password %q: want 1-16 characters without quotes, blanks or #", v)
		}
	}
	return c, nil
}

// lan is ipmi_sim's configuration (ipmi_lan(5)): one MC at 0x20 with LAN
// channel 1 and the VM system interface, user 2 the administrator.
func (c ipmiSimConf) lan(control string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Written by vmtest for one test's virtual machine.")
	w("name %q", c.name)
	w("set_working_mc 0x20")
	w("  startlan 1")
	w("    addr %s %d", c.lanAddr.Addr(), c.lanAddr.Port())
	w("    priv_limit admin")
	// RMCP (IPMI 1.5) with MD5 only; RMCP+ (ipmitool's lanplus, Ironic's
	// default) does not use these.
	for _, p := range []string{"callback", "user", "operator", "admin"} {
		w("    allowed_auths_%s md5", p)
	}
	w("    guid a123456789abcdefa123456789abcdef")
	w("    lan_config_program %q", control+" lan")
	w("  endlan")
	w("  chassis_control %q", control+" chassis")
	// The KCS system interface (channel 15) of the guest: QEMU's
	// ipmi-bmc-extern connects here.
	w("  serial kcs 127.0.0.1 %d codec VM", c.vmPort)
	w("  user 2 true %q %q admin 10 md5", c.user, c.password)
	return b.String()
}

// emu is the command file: the BMC itself, with the Get Device ID answers.
func (c ipmiSimConf) emu() string {
	// mc_add: IPMB address, device ID, device SDRs, device revision,
	// firmware major and minor, device support (sensor, SDR repository,
	// SEL, FRU, chassis), manufacturer, product.
	return fmt.Sprintf("mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x01 1 0 0x9f %#x %#x\nmc_enable 0x20\n", c.mfgID, c.productID)
}
