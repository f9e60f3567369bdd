package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/ironic-go/ironic-agent/collector"
	"github.com/ironic-go/ironic-agent/lldp"
)

func runInventory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inventory", "[--root DIR] [--format json|table] [--collect-lldp [--lldp-timeout D]]",
		"Print this machine's hardware inventory exactly as Ironic Python Agent reports it\n"+
			"(the document posted to ironic-inspector and returned by get_hardware_info).\n"+
			"It reads sysfs, procfs, udev data, SMBIOS and netlink; it runs no external program.", stderr)
	root := fs.String("root", "/", "read the machine below this directory (a recorded fixture tree)")
	format := fs.String("format", "json", "output format: json or table")
	collectLLDP := fs.Bool("collect-lldp", false, "fill interfaces[].lldp by listening for LLDP on every NIC at once (IPA's ipa-collect-lldp=1; needs root)")
	lldpTimeout := fs.Duration("lldp-timeout", lldp.DefaultTimeout, "with --collect-lldp: stop waiting for NICs that heard nothing after this long (IPA's ipa-lldp-timeout)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "json" && *format != "table" {
		return fmt.Errorf("--format %q: want json or table", *format)
	}
	if *collectLLDP && *root != "/" {
		return fmt.Errorf("--collect-lldp listens on this machine's NICs; it cannot be combined with --root %s", *root)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	inv, err := collector.Collect(ctx, collector.Options{
		Root: *root, Logger: logger,
		CollectLLDP: *collectLLDP, LLDPTimeout: *lldpTimeout, LLDP: lldp.Capturer{Logger: logger},
	})
	if err != nil {
		return err
	}
	if *format == "table" {
		return collector.WriteTable(stdout, inv)
	}
	return collector.WriteJSON(stdout, inv)
}
