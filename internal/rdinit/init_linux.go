package rdinit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ModuleList is the file, inside the initramfs, naming the modules to load
// in order (written by internal/ramdisk).
const ModuleList = "/etc/ironic-agent/modules"

// Main is the init. It returns only when it cannot go on as PID 1 is
// expected to (then the caller powers off or holds); everything else it
// logs and carries on with, since a ramdisk with no network or a missing
// module should still say on the console what it found.
func Main(ctx context.Context, console io.Writer) error {
	start := time.Now()
	mountErr := mountAll()
	log := slog.New(slog.NewTextHandler(console, &slog.HandlerOptions{Level: slog.LevelInfo}))
	log = log.With("component", "init")
	for _, e := range mountErr {
		log.Warn("mount", "err", e)
	}
	raw, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		log.Error("read kernel command line", "err", err)
	}
	cfg, err := ParseConfig(ParseCmdline(string(raw)))
	if err != nil {
		// A bad parameter of ours must not keep the agent from starting:
		// say so and go on with what parsed.
		log.Error("kernel command line", "err", err)
	}
	log.Info("ironic-agent init", "uptime", uptime(), "command", strings.Join(cfg.Command, " "), "exit", cfg.Exit)

	t := time.Now()
	n, slow, errs := loadModules(ModuleList, cfg.Modules)
	for _, e := range errs {
		log.Warn("module", "err", e)
	}
	var slowest []string
	for _, m := range slow {
		slowest = append(slowest, m.name+"="+secs(m.took))
	}
	// The slowest ones say where boot time goes (probing, firmware).
	log.Info("modules loaded", "count", n, "seconds", secs(time.Since(t)), "slowest", strings.Join(slowest, " "), "uptime", uptime())
	if fi, err := os.Stat("/sys/firmware/efi/efivars"); err == nil && fi.IsDir() {
		if err := unix.Mount("efivarfs", "/sys/firmware/efi/efivars", "efivarfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			log.Warn("mount efivarfs", "err", err)
		}
	}

	settled := make(chan int, 1)
	go func() { settled <- settleBlock(ctx, 300*time.Millisecond, 10*time.Second) }()
	t = time.Now()
	net := newNetwork(log, cfg)
	if err := net.up(ctx); err != nil {
		log.Warn("network", "err", err)
	}
	log.Info("network ready", "seconds", secs(time.Since(t)), "uptime", uptime())
	log.Info("block devices settled", "count", <-settled, "uptime", uptime())
	log.Info("starting agent", "init_seconds", secs(time.Since(start)), "uptime", uptime())
	return supervise(ctx, log, cfg, console)
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

// uptime is the kernel's, so boot measurements include the firmware and
// kernel phases.
func uptime() string {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
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
	for _, d := range []string{"/dev/pts", "/run/ironic-agent", "/var/lib"} {
		_ = os.MkdirAll(d, 0o755)
	}
	_ = os.Symlink("/proc/self/fd", "/dev/fd")
	_ = os.Symlink("/proc/mounts", "/etc/mtab")
	return errs
}

// loadModules loads, with finit_module, the modules of the list the
// hardware needs (see modulesFor), rescanning the devices after each round
// since bus drivers bring up more devices (virtio_pci the virtio devices,
// an HBA its disks); "all" in extra loads every module, other names in
// extra are loaded too. It returns how many loaded and the five slowest.
func loadModules(list string, extra []string) (int, []moduleTime, []error) {
	data, err := os.ReadFile(list)
	if err != nil {
		return 0, nil, []error{fmt.Errorf("module list: %w", err)}
	}
	entries := parseModuleList(string(data))
	byName := map[string]modEntry{}
	coldplug := false
	for _, e := range entries {
		byName[e.name] = e
		coldplug = coldplug || e.deviceDriver()
	}
	var errs []error
	var slow []moduleTime
	loaded := map[string]bool{}
	load := func(batch []modEntry) int {
		n := 0
		for _, e := range batch {
			if loaded[e.name] {
				continue
			}
			loaded[e.name] = true
			t := time.Now()
			if err := finit(e.path); err != nil {
				errs = append(errs, err)
				continue
			}
			n++
			slow = append(slow, moduleTime{e.name, time.Since(t)})
		}
		return n
	}
	var forced []modEntry
	for _, n := range extra {
		if n == "all" {
			coldplug = false
			continue
		}
		e, ok := byName[strings.ReplaceAll(n, "-", "_")]
		if !ok {
			errs = append(errs, fmt.Errorf("%s=%s: module %s is not in the initramfs", ParamModules, strings.Join(extra, ","), n))
			continue
		}
		forced = append(forced, e)
	}
	if !coldplug {
		// An old list without aliases, or asked for: everything, in order.
		load(entries)
	} else {
		devices := os.DirFS("/sys/devices")
		for round := 0; round < 8; round++ {
			if load(modulesFor(entries, scanModaliases(devices), loaded)) == 0 {
				break
			}
		}
	}
	load(withDeps(entries, forced, loaded))
	count := len(slow)
	sort.Slice(slow, func(i, j int) bool { return slow[i].took > slow[j].took })
	return count, slow[:min(5, len(slow))], errs
}

// moduleTime is how long one module took to load (and probe its devices).
type moduleTime struct {
	name string
	took time.Duration
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
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("finit_module %s: %w", path, err)
	}
	return nil
}

// settleBlock waits until the set of block devices has not changed for
// quiet, at most max, and returns how many there are. Module loading waits
// for the drivers' own asynchronous probing, so this is normally at once.
func settleBlock(ctx context.Context, quiet, max time.Duration) int {
	deadline := time.Now().Add(max)
	last, since := -1, time.Now()
	for {
		ents, _ := os.ReadDir("/sys/block")
		if len(ents) != last {
			last, since = len(ents), time.Now()
		}
		if time.Since(since) >= quiet || time.Now().After(deadline) {
			return last
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(50 * time.Millisecond):
		}
	}
}
