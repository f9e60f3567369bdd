package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/ironic-go/ironic-agent/collector"
)

func runInventory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inventory", "[--root DIR] [--format json|table]",
		"Print this machine's hardware inventory exactly as Ironic Python Agent reports it\n"+
			"(the document posted to ironic-inspector and returned by get_hardware_info).\n"+
			"It reads sysfs, procfs, udev data, SMBIOS and netlink; it runs no external program.", stderr)
	root := fs.String("root", "/", "read the machine below this directory (a recorded fixture tree)")
	format := fs.String("format", "json", "output format: json or table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "json" && *format != "table" {
		return fmt.Errorf("--format %q: want json or table", *format)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	inv, err := collector.Collect(ctx, collector.Options{Root: *root, Logger: logger})
	if err != nil {
		return err
	}
	if *format == "table" {
		return collector.WriteTable(stdout, inv)
	}
	return collector.WriteJSON(stdout, inv)
}
