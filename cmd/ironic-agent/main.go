// The product build links the certified FIPS 140-3 module (GOFIPS140,
// internal/ramdisk.BuildAgent), which also makes fips140=on the default;
// the kernel command line decides instead (fips=1: run restarts itself with
// GODEBUG=fips140=on), so sites without FIPS keep MD5 and every TLS suite.
//
//go:debug fips140=off

// Command ironic-agent is a drop-in replacement for Ironic Python Agent: one
// static binary that builds the hardware inventory, talks to Ironic and
// ironic-inspector, and runs clean and deploy steps.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
)

// command is one subcommand of the binary.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"init", "PID 1 of the agent ramdisk: mounts, modules, DHCP, then runs the agent", runInit},
		{"inventory", "print this machine's IPA-format hardware inventory", runInventory},
		{"capture-fixture", "record this machine's inventory sources as a replayable fixture", runCaptureFixture},
		{"run", "run the agent: inspection, lookup, heartbeats and the REST API Ironic drives", runAgent},
		{"lldp", "print the LLDP neighbours (switch ports) of this machine's NICs", runLLDP},
		{"erase", "erase one disk with the clean steps' code: --metadata, --express or --full", func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return runErase(ctx, args, os.Stdin, stdout, stderr)
		}},
		{"write-image", "download, verify and write an image to a disk as the write_image step does", runWriteImage},
		{"debug-login", "serve root logins for debugging (kernel parameters sshkey= and rootpwd=)", runDebugLogin},
		{"version", "print the agent version", runVersion},
	}
}

// errUsage marks an error already explained by a usage message.
var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: ironic-agent <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-16s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'ironic-agent <command> --help' for the flags of a command.\n")
}

func main() {
	args := os.Args[1:]
	if filepath.Base(os.Args[0]) == rdinit.ModprobeName {
		// The ramdisk's modprobe: the kernel's helper for the modules it
		// asks for, and programs' (mdadm's modprobe md_mod).
		os.Exit(rdinit.Modprobe(args, os.Stderr))
	}
	if isRamdiskInit() {
		args = []string{"init"}
	}
	ctx, stop := context.Background(), context.CancelFunc(func() {})
	if !plainSignals(args) {
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	}
	code := runMain(ctx, args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// plainSignals says whether args name a command that only reads and
// prints, so SIGINT and SIGTERM may end it as the kernel's default action
// does: it then starts without signal.NotifyContext's signal goroutine
// and the thread it takes, which are start-up cost for a command that
// ends in milliseconds. modprobe, which the kernel runs for every module
// it asks for, starts without them too.
func plainSignals(args []string) bool {
	return len(args) > 0 && (args[0] == "inventory" || args[0] == "version")
}

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		return exitCode(c.run(ctx, args[1:], stdout, stderr), c.name, stderr)
	}
	fmt.Fprintf(stderr, "ironic-agent: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// exitCode is the exit status for a command's error, which it reports.
func exitCode(err error, name string, stderr io.Writer) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "ironic-agent %s: %v\n", name, err)
		return 1
	}
}

// newFlagSet returns a flag set whose errors and help go to stderr and which
// describes the command in its usage text.
func newFlagSet(name, synopsis, description string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: ironic-agent %s %s\n\n%s\n\nFlags:\n", name, synopsis, description)
		fs.PrintDefaults()
	}
	return fs
}

// newOptionFlagSet is newFlagSet for a command whose flags are mostly the
// configuration options: they are listed by group instead of by name.
func newOptionFlagSet(name, synopsis, description string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: ironic-agent %s %s\n\n%s\n", name, synopsis, description)
		writeOptionHelp(stderr, fs, "Configuration sources and the log file")
	}
	return fs
}

// parseFlags parses args and maps flag errors to errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}
