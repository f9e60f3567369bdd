package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/internal/logging"
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

	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ironic-agent run: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	var cmdline string
	if *cmdlineFile != "" {
		b, err := os.ReadFile(*cmdlineFile)
		if err != nil {
			return fmt.Errorf("kernel command line: %w", err)
		}
		cmdline = string(b)
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

	ring := agent.NewLogRing(2 << 20)
	level := slog.LevelInfo
	if cfg.Debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(stderr, ring), &slog.HandlerOptions{Level: level}))
	// First, so every log says which machine wrote it (the release stamps
	// add the version, the commit and the kernel to this line).
	log.Info("ironic-agent", "boot_mac", logging.BootMAC(agent.NormalizeBOOTIF(cfg.BootIF), "/sys/class/net"))
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
