package main

import (
	"context"
	"crypto/fips140"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/internal/lockdown"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/version"
)

func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newOptionFlagSet("run", "[flags]",
		"Run the agent: inspection (when a callback URL is set), lookup, heartbeats and the\n"+
			"agent REST API Ironic drives, exactly as Ironic Python Agent does.\n\n"+
			"Configuration comes from the kernel command line (ipa-* parameters), then the config\n"+
			"file ([DEFAULT] with IPA's option names; /etc/ironic-python-agent/ironic-python-agent.conf,\n"+
			"/etc/ironic-python-agent.conf and /etc/ironic-python-agent.d/*.conf unless --config-file\n"+
			"or --config-dir is given), then these flags; each later source wins.", stderr)
	fv := config.RegisterFlags(fs)
	cmdlineFile := fs.String("kernel-cmdline", "/proc/cmdline", "read the kernel command line from `PATH` (\"\" to ignore it)")
	logFile := fs.String("log-file", "", "also write the log to `PATH`, moved to PATH.1 at 4 MiB (the ramdisk's init sets "+logging.AgentLogFile+")")

	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ironic-agent run: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	// The logger comes first, so that its first line, even before a
	// configuration error, says which agent runs; the level follows the
	// configuration's debug option once it is loaded.
	ring := agent.NewLogRing(2 << 20)
	out := io.MultiWriter(stderr, ring)
	var logFileErr error
	if *logFile != "" {
		// A file an operator logged in for debugging can read while a
		// step runs; it must not keep the agent from starting.
		f, err := logging.OpenRotating(*logFile, 4<<20)
		if err != nil {
			logFileErr = err
		} else {
			defer f.Close()
			out = io.MultiWriter(stderr, ring, f)
		}
	}
	var level slog.LevelVar
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: &level}))
	var cmdline string
	var cmdlineErr error
	if *cmdlineFile != "" {
		b, err := os.ReadFile(*cmdlineFile)
		cmdline, cmdlineErr = string(b), err
	}
	// The boot MAC says which machine wrote every log that follows.
	log.Info("ironic-agent", append(version.LogAttrs(), "boot_mac", logging.BootMAC(agent.NormalizeBOOTIF(bootIF(cmdline)), "/sys/class/net"))...)
	if logFileErr != nil {
		log.Warn("log file not written: the log goes to the console and the log bundle only", "error", logFileErr)
	}
	if cmdlineErr != nil {
		return fmt.Errorf("kernel command line: %w", cmdlineErr)
	}
	in := config.Inputs{Cmdline: cmdline, Flags: fv.Options, ConfigFiles: fv.ConfigFiles, ConfigDirs: fv.ConfigDirs}
	if len(fv.ConfigFiles) == 0 && len(fv.ConfigDirs) == 0 {
		for _, f := range config.DefaultConfigFiles() {
			if _, err := os.Stat(f); err == nil {
				in.ConfigFiles = append(in.ConfigFiles, f)
			}
		}
		in.ConfigDirs = config.DefaultConfigDirs()
	}
	cfg, err := config.Load(in)
	if err != nil {
		return err
	}
	if fipsRequested(cfg.KernelParams) && !fips140.Enabled() {
		// Go's FIPS 140-3 mode is chosen at process start only.
		return reexecFIPS()
	}

	if cfg.Debug {
		level.Set(slog.LevelDebug)
	}
	if fips140.Enabled() {
		log.Info(agent.EventFIPSMode,
			"module", fips140.Version(), "kernel_fips_enabled", kernelFIPS())
	}
	// Under Secure Boot the kernel restricts interfaces (lockdown): the
	// log says so before anything is refused.
	sb := lockdown.Read(lockdown.ModePath, lockdown.EFIVarsDir)
	log.Info(lockdown.EventBootSecurity, "secure_boot", sb.SecureBoot, "lockdown", sb.Lockdown)
	// Before anything reads the URLs: mDNS may give them, and options.
	if err := agent.ResolveMDNS(ctx, cfg, log, nil); err != nil {
		return err
	}
	for _, o := range config.Options() {
		if src := cfg.Origins[o.Name]; src != "" && src != "default ("+o.Name+")" {
			log.Debug("configuration", "option", o.Name, "from", src)
		}
	}

	a, err := agent.New(ctx, agent.Options{Config: cfg, Log: log, LogRing: ring, Rescue: rescueServer(log, cfg.StateDir)})
	if err != nil {
		return err
	}
	err = a.Run(ctx)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// bootIF is the BOOTIF parameter of a kernel command line ("" without
// one), read before the configuration so the first log line has it.
func bootIF(cmdline string) string {
	for _, f := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(f, "BOOTIF="); ok {
			return v
		}
	}
	return ""
}
