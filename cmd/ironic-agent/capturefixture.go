package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/ironic-go/ironic-agent/bmc"
	"github.com/ironic-go/ironic-agent/collector"
	"github.com/ironic-go/ironic-agent/internal/version"
)

func runCaptureFixture(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("capture-fixture", "DIR",
		"Record this machine as a fixture a developer can replay: every file the inventory reads\n"+
			"(sysfs, procfs, udev data, /dev/disk/by-path links, SMBIOS tables), and every file the\n"+
			"pci-devices and numa-topology inspection collectors read, is copied below DIR/root\n"+
			"with its symbolic links, netlink and ethtool answers are saved in\n"+
			"DIR/root/run/ironic-agent-capture/net.json, and the live inventory in DIR/inventory.json.\n"+
			"`ironic-agent inventory --root DIR/root` then prints the same inventory.\n"+
			"Attach DIR to a bug report. It holds serial numbers, MAC and IP addresses and the host name.\n"+
			"Runs no external program, so it works inside the agent's ramdisk.", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	dir := fs.Arg(0)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Capture also runs the collector's inspection units (PCI, NUMA, USB,
	// extra hardware), so an inspection replayed on the tree posts what this machine
	// would.
	opts := collector.Options{Root: "/", Logger: logger}
	var recorders []collector.FixtureRecorder
	if rec, closeDev := recordIPMI(logger); rec != nil {
		defer closeDev()
		opts.IPMI = rec
		recorders = append(recorders, func(_ context.Context, dir string) error {
			return rec.Recording("recorded by ironic-agent capture-fixture " + version.Version()).WriteFile(filepath.Join(dir, "ipmi.json"))
		})
	}
	inv, err := collector.Capture(ctx, dir, opts, recorders...)
	if inv == nil {
		return err
	}
	if err != nil {
		// The tree is written; some paths could not be copied.
		fmt.Fprintf(stderr, "ironic-agent capture-fixture: warning: %v\n", err)
	}
	if err := writeFixtureReadme(dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "captured %d interfaces, %d disks into %s\n", len(inv.Interfaces), len(inv.Disks), dir)
	return nil
}

// writeFixtureReadme starts DIR/README.md with where and when the fixture
// was recorded, unless the file exists; the developer adds why it matters.
func writeFixtureReadme(dir string) error {
	p := filepath.Join(dir, "README.md")
	if _, err := os.Stat(p); err == nil || !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	text := fmt.Sprintf("# Fixture %s\n\nRecorded with `ironic-agent capture-fixture` %s on host %q, kernel %s, %s/%s, at %s.\n\n"+
		"`root/` holds the files the collector read, `inventory.json` the inventory of the live machine.\n",
		filepath.Base(filepath.Clean(dir)), version.Version(), host, trimNL(string(kernel)), runtime.GOOS, runtime.GOARCH,
		time.Now().UTC().Format(time.RFC3339))
	return os.WriteFile(p, []byte(text), 0o644)
}

func trimNL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	return s
}

// recordIPMI opens the IPMI device, if the machine has one, behind a
// recorder, so the fixture keeps the BMC's replies in ipmi.json.
func recordIPMI(logger *slog.Logger) (*bmc.Recorder, func()) {
	for _, p := range bmc.DeviceNodes() {
		fi, err := os.Stat("/" + p)
		if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
			continue
		}
		d, err := bmc.OpenDevice("/" + p)
		if err != nil {
			logger.Warn("IPMI device not recorded", "error", err)
			return nil, nil
		}
		return &bmc.Recorder{Next: d}, func() { _ = d.Close() }
	}
	return nil, nil
}
