package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/inventory"
	"golang.org/x/sys/unix"
)

// runErase is `ironic-agent erase DEVICE --metadata|--express|--full`: the
// clean steps' code for an operator at a console, confined to the one
// device named. stdin answers the confirmation prompt.
func runErase(ctx context.Context, args []string, stdin *os.File, stdout, stderr io.Writer) error {
	fs := newFlagSet("erase", "DEVICE --metadata|--express|--full [--yes] [--iterations N] [--zeroize=false]",
		"Erase one device with the code of the agent's clean steps:\n"+
			"  --metadata  erase_devices_metadata: partition tables at both ends and every\n"+
			"              filesystem, RAID and LVM signature, on the device and its partitions\n"+
			"  --express   erase_devices_express: NVMe sanitize or format; else a (secure) discard\n"+
			"              where the device supports it, then the metadata wipe\n"+
			"  --full      erase_devices: ATA secure erase or NVMe format when the drive supports\n"+
			"              it, else random overwrite passes and a zero pass\n"+
			"Only DEVICE (and its partitions) is touched. A device that is mounted, holds the\n"+
			"running system or holds a shared cluster filesystem (GPFS, VMFS, GFS2) is refused;\n"+
			"RAID members are skipped, read-only devices too (--full fails on them), as the clean\n"+
			"steps do. On a terminal, erase asks you to type the device name (or \"yes\") first;\n"+
			"--yes skips the question, and is required when stdin is not a terminal (scripts).", stderr)
	yes := fs.Bool("yes", false, "do not ask for confirmation (required when stdin is not a terminal)")
	metadata := fs.Bool("metadata", false, "wipe metadata (erase_devices_metadata)")
	express := fs.Bool("express", false, "express erase (erase_devices_express)")
	full := fs.Bool("full", false, "full erase (erase_devices)")
	iterations := fs.Int("iterations", 1, "with --full: random overwrite passes when no secure erase is available (agent_erase_devices_iterations)")
	zeroize := fs.Bool("zeroize", true, "with --full: finish overwriting with a pass of zeroes (agent_erase_devices_zeroize)")
	secure := fs.Bool("secure-erase", true, "with --full/--express: use ATA secure erase and NVMe format when the drive supports them")
	fallback := fs.Bool("continue-if-secure-erase-failed", false, "with --full: overwrite when a secure erase the drive claims fails, instead of stopping")
	dev, err := parseWithDevice(fs, args)
	if err != nil {
		return err
	}
	modes := 0
	for _, m := range []bool{*metadata, *express, *full} {
		if m {
			modes++
		}
	}
	if modes != 1 {
		fmt.Fprintln(stderr, "ironic-agent erase: choose exactly one of --metadata, --express, --full")
		fs.Usage()
		return errUsage
	}
	if *iterations < 0 {
		return fmt.Errorf("--iterations %d: must be 0 or more", *iterations)
	}
	opts := erase.DefaultEraseOptions()
	opts.Iterations, opts.Zeroize = *iterations, *zeroize
	opts.EnableATASecureErase, opts.EnableNVMeSecureErase = *secure, *secure
	opts.ContinueIfSecureEraseFailed = *fallback
	mode := "full erase"
	switch {
	case *metadata:
		mode = "metadata wipe"
	case *express:
		mode = "express erase"
	}
	guard := blockdev.NewGuard([]string{dev})
	// A device the guard refuses is not worth a question.
	if err := guard.Check(dev); err != nil {
		return err
	}
	if !*yes {
		if err := confirmErase(stdin, stderr, dev, mode); err != nil {
			return err
		}
	}
	prog := &progressPrinter{w: stderr}
	e := &erase.Eraser{
		Guard:    guard,
		Runner:   blockdev.ExecRunner{},
		Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Progress: prog.report,
	}
	disks := []inventory.Disk{{Name: dev}}
	var res map[string]erase.DeviceResult
	start := time.Now()
	switch {
	case *metadata:
		res, err = e.EraseDevicesMetadata(ctx, disks, opts)
	case *express:
		res, err = e.EraseDevicesExpress(ctx, disks, opts)
	default:
		res, err = e.EraseDevices(ctx, disks, opts)
	}
	prog.done()
	if err != nil {
		if len(res) > 0 {
			fmt.Fprintf(stderr, "partial results before the failure: %s\n", describeResults(res))
		}
		return err
	}
	if len(res) == 0 {
		return errors.New("nothing was erased")
	}
	fmt.Fprintf(stdout, "%s of %s done in %s: %s\n", mode, dev, time.Since(start).Round(time.Millisecond), describeResults(res))
	return nil
}

// errNotConfirmed is the answer to an erase the operator did not confirm.
var errNotConfirmed = errors.New("not confirmed: nothing was erased")

// confirmErase asks, as wipefs-like tools do, before every erase mode:
// even the metadata wipe makes the data unreachable. The operator types
// the device's path or name, or "yes". Without a terminal to ask on, it
// refuses: a script must say --yes, so a stray pipe never erases a disk.
func confirmErase(stdin *os.File, prompt io.Writer, dev, mode string) error {
	if stdin == nil || !isTerminal(stdin) {
		return fmt.Errorf("refusing the %s of %s: stdin is not a terminal to confirm on; add --yes to erase without confirmation", mode, dev)
	}
	fmt.Fprintf(prompt, "The %s of %s destroys the data on it and its partitions.\nType %q or \"yes\" to go on: ", mode, dev, filepath.Base(dev))
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && (!errors.Is(err, io.EOF) || line == "") {
		fmt.Fprintln(prompt)
		return errNotConfirmed
	}
	switch strings.TrimSpace(line) {
	case "yes", dev, filepath.Base(dev):
		return nil
	}
	return errNotConfirmed
}

// isTerminal reports whether f is a terminal (TCGETS succeeds on it).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// parseWithDevice parses flags placed before or after the one positional
// DEVICE argument.
func parseWithDevice(fs *flag.FlagSet, args []string) (string, error) {
	if err := parseFlags(fs, args); err != nil {
		return "", err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprintln(fs.Output(), "ironic-agent erase: no DEVICE given; name the device to erase explicitly")
		fs.Usage()
		return "", errUsage
	}
	dev := rest[0]
	if err := parseFlags(fs, rest[1:]); err != nil {
		return "", err
	}
	if len(fs.Args()) > 0 {
		fmt.Fprintf(fs.Output(), "ironic-agent erase: one DEVICE only, got also %q\n", fs.Args())
		fs.Usage()
		return "", errUsage
	}
	return dev, nil
}

// describeResults renders "dev (method, detail, N MiB written)" per
// device, in name order.
func describeResults(res map[string]erase.DeviceResult) string {
	names := make([]string, 0, len(res))
	for n := range res {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		r := res[n]
		s := n + " (" + r.Method
		if r.Detail != "" {
			s += ": " + r.Detail
		}
		if r.Bytes > 0 {
			s += fmt.Sprintf(", %.1f MiB written", float64(r.Bytes)/(1<<20))
		}
		parts[i] = s + ")"
	}
	return strings.Join(parts, "; ")
}

// progressPrinter shows overwrite passes on one refreshed line, at most a
// few times a second.
type progressPrinter struct {
	w    io.Writer
	mu   sync.Mutex
	last time.Time
	used bool
}

func (p *progressPrinter) report(dev string, pass, passes int, done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < 250*time.Millisecond && done != total {
		return
	}
	p.last = time.Now()
	p.used = true
	pct := 100.0
	if total > 0 {
		pct = float64(done) * 100 / float64(total)
	}
	fmt.Fprintf(p.w, "\r%s: pass %d/%d %5.1f%% (%d/%d MiB)   ", dev, pass, passes, pct, done>>20, total>>20)
}

func (p *progressPrinter) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used {
		fmt.Fprintln(p.w)
	}
}
