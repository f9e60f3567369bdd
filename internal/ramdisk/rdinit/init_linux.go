package rdinit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/clock"
	"github.com/ironic-go/ironic-agent/internal/lockdown"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/programs"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/netnames"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/networkdata"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/netup"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/vmedia"
	"github.com/ironic-go/ironic-agent/internal/version"
	"github.com/ironic-go/ironic-agent/rescue"
)

// ModuleList is the file, inside the initramfs, naming the modules to load
// in order (written by internal/ramdisk).
const ModuleList = "/etc/ironic-agent/modules"

// Main is the init. It returns only when it cannot go on as PID 1 is
// expected to (then the caller powers off or holds); everything else it
// logs and carries on with, since a ramdisk with no network or a missing
// module should still say on the console what it found.
//
// A panic in a goroutine Main starts is handed to onPanic (which should
// report it and power off: that goroutine's work is lost); a nil onPanic
// lets it end the process. Panics of the calling goroutine are the
// caller's to recover.
func Main(ctx context.Context, console io.Writer, onPanic func(error)) error {
	// Everything below mounts, loads modules and writes at the machine's
	// own paths: only the ramdisk's PID 1 may do that, never a test or a
	// command run by hand on a host.
	if os.Getpid() != 1 {
		return fmt.Errorf("rdinit: refusing to run as PID %d: the init mounts /proc, /sys, /dev, /run and /tmp and loads modules, which only the ramdisk's PID 1 may do", os.Getpid())
	}
	start := time.Now()
	mountErr := mountAll()
	// The log goes to a file too (on /run, mounted above), from its first
	// line: the agent puts it into the logs Ironic collects.
	logFile, logFileErr := openInitLog(logging.InitLogFile)
	log := slog.New(slog.NewTextHandler(io.MultiWriter(console, logFile), &slog.HandlerOptions{Level: slog.LevelInfo}))
	log = log.With("component", "init")
	raw, rawErr := os.ReadFile("/proc/cmdline")
	cmdline := ParseCmdline(string(raw))
	cfg, err := ParseConfig(cmdline)
	// First, so the console says which agent and kernel booted, and on
	// which machine.
	log.Info(EventVersion, append(version.LogAttrs(), "boot_mac", logging.BootMAC(cfg.BootIF, "/sys/class/net"))...)
	if logFileErr != nil {
		log.Warn("init log file", "file", logging.InitLogFile, "error", logFileErr)
	}
	for _, e := range mountErr {
		log.Warn("mount", "error", e)
	}
	if rawErr != nil {
		log.Error("read kernel command line", "error", rawErr)
	}
	// The debug login before anything else that may hang: sshkey= and
	// rootpwd= are for machines whose boot goes wrong.
	debugOut := io.MultiWriter(console, logFile)
	debugPID := startDebugLogin(log, string(raw), "", debugOut, onPanic)
	if err != nil {
		// A bad parameter of ours must not keep the agent from starting:
		// say so and go on with what parsed.
		log.Error("kernel command line", "error", err)
	}
	if v, ok := cmdline["ip"]; ok {
		// The kernel's (IP_PNP, not in Debian's) and dracut's parameter:
		// IPA's images read it no more than this init does, and an
		// operator who set it should see that nothing took it.
		log.Warn("kernel parameter ip= not applied: the network comes from DHCP, router advertisements or a config drive's network data", "ip", v)
	}
	log.Info(EventInit, "uptime", logging.Uptime(), "command", strings.Join(cfg.Command, " "), "exit", cfg.Exit)
	if _, err := setFallbackHostname(cfg.HostnameFile); err != nil {
		log.Warn("fallback host name", "name", FallbackHostname, "error", err)
	}

	// The kernel loads what it needs later (a file system at its mount,
	// an md level, a device-mapper target) through this binary as its
	// modprobe: the manifest's ondemand modules stay out of the boot.
	if err := os.WriteFile("/proc/sys/kernel/modprobe", []byte(ModprobePath), 0o644); err != nil {
		log.Warn("kernel module helper: modules the kernel asks for later (file systems, md levels, device-mapper targets) will not load", "path", ModprobePath, "error", err)
	}
	t := time.Now()
	st, errs := loadModules(ModuleList, cfg.Modules, cfg.ModuleJobs, onPanic)
	for _, e := range errs {
		log.Warn(EventModule, "error", e)
	}
	var slowest []string
	for _, m := range st.slowest {
		slowest = append(slowest, m.name+"="+logging.Seconds(m.took))
	}
	// The slowest ones say where boot time goes (probing, firmware); the
	// scans are the price of coldplug without udev.
	log.Info(EventModulesLoaded, "count", st.loaded, "seconds", logging.Seconds(time.Since(t)), "parallel", st.maxParallel,
		"scans", st.scans, "scan_seconds", logging.Seconds(st.scanTime), "slowest", strings.Join(slowest, " "), "overlay_lists", strings.Join(st.overlays, " "), "uptime", logging.Uptime())
	if fi, err := os.Stat("/sys/firmware/efi/efivars"); err == nil && fi.IsDir() {
		if err := unix.Mount("efivarfs", "/sys/firmware/efi/efivars", "efivarfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			log.Warn("mount efivarfs", "error", err)
		}
	}

	// The NICs' names before anything reads them: the network set-up,
	// the operator's parameters (ipa-enable-vlan-interfaces) and the
	// agent's inventory name NICs as IPA's images do.
	nameNICs(log, "/sys", cfg)

	settled := make(chan int, 1)
	go func() {
		defer Recover(onPanic)
		settled <- settleBlock(ctx, 300*time.Millisecond, 10*time.Second)
	}()
	// waitBlock waits for the block devices once, for whoever needs
	// them first: the one value settled carries is received once.
	blockCount := -1
	waitBlock := func() {
		if blockCount < 0 {
			blockCount = <-settled
		}
	}
	if cmdline[ParamBootMethod] == vmedia.BootMethodVmedia {
		// The media are block devices: wait for them.
		waitBlock()
	}
	if params := vmedia.Load(ctx, log, cmdline, vmedia.Options{SysBlock: "/sys/class/block", SysUSB: "/sys/bus/usb/devices",
		DevDir: "/dev", MountDir: VirtualMediaMount, Etc: "/etc", Publisher: cfg.PublisherID, USBWait: 10 * time.Second,
		LoadModule: func(name string) error { return loadModule(ModuleList, "/sys/module", name, finit, onPanic) },
	}); len(params) > 0 {
		cfg = mergeVirtualMedia(log, cfg, string(raw), params)
		debugPID = debugLoginFromMedia(log, debugPID, params, cfg.KernelCmdline, debugOut, onPanic)
	}
	t = time.Now()
	var data *networkdata.Data
	if look, why := cfg.lookForConfigDrive(); look {
		// The config drive is a block device: wait for them (unless
		// virtual media did), then look for it before any NIC is
		// configured.
		waitBlock()
		d, err := netup.LoadNetworkData(log, ConfigDriveMount, cfg.PublisherID)
		if err != nil {
			// Bad network data must not leave the machine silent: say
			// why on the console and fall back to DHCP on every NIC.
			log.Error("network data not applied: DHCP on every NIC instead", "error", err)
		}
		data = d
	} else if why != "" {
		log.Info(why, "BOOTIF", cfg.BootIF)
	}
	nw := netup.New(log, cfg.Config, netup.Options{
		Data: data,
		// 802.1Q for ipa-enable-vlan-interfaces: the coldplug above loads
		// drivers for devices, and a VLAN is no device until it is made.
		LoadModule: func(name string) error { return loadModule(ModuleList, "/sys/module", name, finit, onPanic) },
		Go: func(f func()) {
			go func() {
				defer Recover(onPanic)
				f()
			}()
		},
	})
	if err := nw.Up(ctx); err != nil {
		log.Warn("network", "error", err)
	}
	log.Info(EventNetworkReady, "seconds", logging.Seconds(time.Since(t)), "uptime", logging.Uptime())
	waitBlock()
	log.Info("block devices settled", "count", blockCount, "uptime", logging.Uptime())
	log.Info("starting agent", "init_seconds", logging.Seconds(time.Since(start)), "uptime", logging.Uptime())
	return supervise(ctx, log, cfg, console, debugPID, onPanic)
}

// startDebugLogin starts `ironic-agent debug-login` (SSH and console
// logins for root) when the command line names sshkey= or rootpwd=, or
// the ramdisk holds root's authorized_keys (an overlay's), and returns its
// PID (0: none). It runs as a process of its own, not in PID
// 1: its shells are its children, whose exit status PID 1's reaping of
// every orphan would otherwise take from it. It parses the parameters
// itself, from cmdlineFile ("": /proc/cmdline), and logs what it refused
// and why, and its logins; its log goes to out (the console and the
// init's log file) through a pipe.
func startDebugLogin(log *slog.Logger, cmdline, cmdlineFile string, out io.Writer, onPanic func(error)) int {
	_, keysErr := os.Stat(rescue.AuthorizedKeysFile)
	if !rescue.BootLoginAsked(cmdline) && keysErr != nil {
		return 0
	}
	self, err := os.Executable()
	if err != nil {
		self = "/usr/bin/ironic-agent"
	}
	logFD := uintptr(2)
	r, w, perr := os.Pipe()
	if perr == nil {
		logFD = w.Fd()
		defer w.Close()
		go func() {
			defer Recover(onPanic)
			_, _ = io.Copy(out, r)
			r.Close()
		}()
	} else {
		log.Warn("debug login: its log goes to the console only", "error", perr)
	}
	argv := []string{"ironic-agent", "debug-login"}
	source := "kernel command line"
	if cmdlineFile != "" {
		argv = append(argv, "--kernel-cmdline", cmdlineFile)
		source = "virtual media's " + vmedia.ParametersFile + " merged into " + cmdlineFile
	}
	pid, err := syscall.ForkExec(self, argv, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{"PATH=" + programs.RamdiskPath, "HOME=/root", "TERM=linux"},
		Files: []uintptr{0, logFD, logFD},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		log.Error("debug login not started", "argv", strings.Join(argv, " "), "error", err)
		return 0
	}
	if keysErr == nil {
		source += ", " + rescue.AuthorizedKeysFile
	}
	log.Info(EventDebugLoginStarted, "pid", pid, "params", rescue.ParamSSHKey+", "+rescue.ParamRootPassword, "from", source)
	return pid
}

// debugLoginFromMedia starts the debug login again when virtual media's
// parameters.txt (params) names sshkey= or rootpwd=, on the merged command
// line in the file merged, where the medium's values replaced the
// kernel's as for every parameter; the one the kernel's line started, if
// any, is stopped first (its sessions end) so the new one has port 22.
// It returns the debug login's PID.
func debugLoginFromMedia(log *slog.Logger, pid int, params map[string]string, merged string, out io.Writer, onPanic func(error)) int {
	_, key := params[rescue.ParamSSHKey]
	_, pw := params[rescue.ParamRootPassword]
	if !key && !pw {
		return pid
	}
	if merged == "" {
		// mergeVirtualMedia said why.
		log.Error("debug login: virtual media's parameters not taken: no merged command line", "running_pid", pid)
		return pid
	}
	line, err := os.ReadFile(merged)
	if err != nil {
		log.Error("debug login: virtual media's parameters not taken", "file", merged, "error", err, "running_pid", pid)
		return pid
	}
	if pid != 0 {
		log.Info(EventDebugLoginReplaced, "pid", pid)
		stopProcess(log, pid, 5*time.Second)
	}
	return startDebugLogin(log, string(line), merged, out, onPanic)
}

// stopProcess ends child pid: SIGTERM, then SIGKILL after grace, and
// reaps it.
func stopProcess(log *slog.Logger, pid int, grace time.Duration) {
	_ = unix.Kill(pid, unix.SIGTERM)
	deadline := time.Now().Add(grace)
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if got == pid || err != nil {
			return
		}
		if time.Now().After(deadline) {
			log.Warn("process did not end on SIGTERM: killed", "pid", pid, "seconds", logging.Seconds(grace))
			_ = unix.Kill(pid, unix.SIGKILL)
			_, _ = unix.Wait4(pid, &ws, 0, nil)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openInitLog opens the init's log file for appending, or returns a
// writer that drops everything and the reason.
func openInitLog(path string) (io.Writer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return io.Discard, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return io.Discard, err
	}
	return &cappedWriter{w: f, left: maxInitLog}, nil
}

// maxInitLog bounds the init's log file in RAM (a tmpfs): the init logs
// little after the agent started, but a NIC without a lease logs each
// DHCP retry.
const maxInitLog = 8 << 20

// cappedWriter writes until left bytes are spent, then one line saying
// so, then nothing; it never fails, so the console keeps every line.
type cappedWriter struct {
	mu   sync.Mutex
	w    io.Writer
	left int
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.left < 0:
	case len(p) <= c.left:
		_, _ = c.w.Write(p)
		c.left -= len(p)
	default:
		_, _ = fmt.Fprintf(c.w, "init log file full (%d bytes): the rest is on the console only\n", maxInitLog)
		c.left = -1
	}
	return len(p), nil
}

// nameNICs renames the NICs as udev does in IPA's images (package
// netnames): net_id's names under cfg's naming scheme, by the policy of
// systemd's .link files, unless net.ifnames=0. Every rename, and every
// one that failed with its reason, is logged.
func nameNICs(log *slog.Logger, sys string, cfg Config) {
	for _, e := range cfg.NamingProblems {
		log.Warn(EventNICNaming, "error", e)
	}
	plans, errs := netnames.Plans(sys, cfg.NamingScheme, cfg.Ifnames)
	for _, e := range errs {
		log.Warn(EventNICNaming, "error", e)
	}
	renamed := 0
	for _, r := range netnames.Apply(netnames.Netlink{}, plans) {
		switch {
		case r.Err != nil && r.AltName:
			log.Warn("NIC alternative name not added", "link", r.Interface, "name", r.Name, "error", r.Err)
		case r.Err != nil:
			log.Warn(EventNICNotRenamed, "link", r.Interface, "name", r.Name, "why", r.Why, "error", r.Err)
		case !r.AltName:
			renamed++
			log.Info(EventNICRenamed, "link", r.Interface, "name", r.Name, "why", r.Why)
		}
	}
	for _, p := range plans {
		if p.Name == "" {
			log.Info(EventNICKept, "link", p.Interface, "why", p.Why, "scheme", p.Scheme)
		}
	}
	log.Info(EventNICsNamed, "renamed", renamed, "nics", len(plans), "ifnames", cfg.Ifnames, "scheme", cfg.NamingScheme.Name)
}

// mergeVirtualMedia is the configuration from the kernel command line raw
// with params (virtual media's parameters.txt) after it, so its values win
// as in IPA's get_agent_params: the init's network takes them (VLANs,
// BOOTIF, network data), and the agent reads the merged line from
// MergedCmdline instead of /proc/cmdline. What the init did before
// (modules, the host name) stays as the kernel's line said.
func mergeVirtualMedia(log *slog.Logger, cfg Config, raw string, params map[string]string) Config {
	merged := vmedia.AppendParameters(raw, params)
	// 0600: it holds the agent's token.
	if err := os.WriteFile(MergedCmdline, []byte(merged), 0o600); err != nil {
		log.Error("virtual media parameters not passed to the agent", "file", MergedCmdline, "error", err)
		return cfg
	}
	c, err := ParseConfig(ParseCmdline(merged))
	if err != nil {
		log.Error("kernel command line with virtual media parameters", "error", err)
	}
	c.KernelCmdline = MergedCmdline
	return c
}

func mountAll() []error {
	var errs []error
	for _, m := range []struct {
		src, dst, fs string
		flags        uintptr
	}{
		{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID},
		{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV},
		{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV},
	} {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := unix.Mount(m.src, m.dst, m.fs, m.flags, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			errs = append(errs, fmt.Errorf("%s on %s: %w", m.fs, m.dst, err))
		}
	}
	// debugfs: IPA's Intel i40e LLDP work-around writes to it.
	if err := unix.Mount("debugfs", "/sys/kernel/debug", "debugfs", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("debugfs: %w", err))
	}
	// securityfs: the kernel's lockdown mode, which the agent reports
	// (internal/lockdown).
	if err := unix.Mount("securityfs", "/sys/kernel/security", "securityfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil && !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("securityfs: %w", err))
	}
	for _, d := range []string{"/dev/pts", "/run/ironic-agent", "/var/lib"} {
		_ = os.MkdirAll(d, 0o755)
	}
	// devpts: the terminals of the rescue user's SSH sessions.
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0620,ptmxmode=0666"); err != nil && !errors.Is(err, unix.EBUSY) {
		errs = append(errs, fmt.Errorf("devpts: %w", err))
	}
	_ = os.Symlink("/proc/self/fd", "/dev/fd")
	_ = os.Symlink("/proc/mounts", "/etc/mtab")
	return errs
}

// loadModules loads, with finit_module, the modules of the list the
// hardware needs (see modulesFor), each after the modules it depends on,
// jobs at a time, rescanning the devices when the queue runs dry since bus
// drivers bring up more devices (virtio_pci the virtio devices, an HBA its
// disks). One at a time is the default: under QEMU's emulation, loads in
// parallel took longer in total for the same modules. "all" in extra loads
// every module; other names in extra are loaded too.
func loadModules(list string, extra []string, jobs int, onPanic func(error)) (loadStats, []error) {
	data, err := os.ReadFile(list)
	if err != nil {
		return loadStats{}, []error{fmt.Errorf("module list: %w", err)}
	}
	entries, overlays, errs := withOverlayLists(parseModuleList(string(data)), os.DirFS(filepath.Dir(list)), "modules.d")
	l := &loader{entries: entries, byName: map[string]modEntry{}, load: finit, jobs: jobs, onPanic: onPanic,
		present: func(name string) bool { _, err := os.Stat(filepath.Join("/sys/module", name)); return err == nil }}
	coldplug := false
	for _, e := range entries {
		l.byName[e.name] = e
		coldplug = coldplug || e.deviceDriver()
	}
	l.scan = newModaliasScanner(os.DirFS("/sys/bus")).scan
	var forced []modEntry
	for _, n := range extra {
		if n == "all" {
			// An old list without aliases, or asked for: everything.
			coldplug = false
			continue
		}
		e, ok := l.byName[strings.ReplaceAll(n, "-", "_")]
		if !ok {
			errs = append(errs, fmt.Errorf("%s=%s: module %s is not in the initramfs", ParamModules, strings.Join(extra, ","), n))
			continue
		}
		forced = append(forced, e)
	}
	st := l.run(forced, coldplug)
	st.overlays = overlays
	// USB disks come after usb_storage's delay_use, when the scans are
	// over: wait for them, then load their drivers (sd_mod, sr_mod).
	if coldplug && waitUSBStorageScan(os.DirFS("/sys"), 5*time.Second) {
		more := l.run(nil, true)
		st.loaded += more.loaded
		st.scans += more.scans
		st.scanTime += more.scanTime
		st.errs = append(st.errs, more.errs...)
	}
	return st, append(errs, st.errs...)
}

func finit(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// EEXIST: already loaded (built in or a dependency loaded twice).
	// ENODEV: the driver has no hardware here (ipmi_si with no BMC,
	// efivarfs under BIOS), which is normal on a generic ramdisk.
	// A compressed module (kept so by the build when the kernel has
	// CONFIG_MODULE_DECOMPRESS) is decompressed by the kernel itself.
	flags := 0
	if compressedModule(path) {
		flags = unix.MODULE_INIT_COMPRESSED_FILE
	}
	if err := unix.FinitModule(int(f.Fd()), "", flags); err != nil && !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.ENODEV) {
		// An unsigned module (an overlay's, packed with
		// -allow-unsigned-modules) under Secure Boot: say so.
		mode, _ := lockdown.Mode(lockdown.ModePath)
		if r := signatureRefusal(path, err, mode); r != nil {
			return r
		}
		return fmt.Errorf("finit_module %s: %w", path, err)
	}
	return nil
}

// settleBlock waits until the set of block devices has not changed for
// quiet, at most limit, and returns how many there are. Module loading
// waits for the drivers' own asynchronous probing, so this is normally at
// once; USB mass storage is the exception (usbStoragePending).
func settleBlock(ctx context.Context, quiet, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	last, since := -1, time.Now()
	sysfs := os.DirFS("/sys")
	for {
		ents, _ := os.ReadDir("/sys/block")
		if len(ents) != last {
			last, since = len(ents), time.Now()
		}
		// A USB disk usb_storage has not scanned yet is still coming.
		if usbStoragePending(sysfs) > 0 {
			since = time.Now()
		}
		if time.Since(since) >= quiet || time.Now().After(deadline) {
			return last
		}
		if clock.Sleep(ctx, 50*time.Millisecond) != nil {
			return last
		}
	}
}
