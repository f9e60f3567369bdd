// Command hostguard records the host state a test run must not change and
// compares two records; ./test.sh runs it around the suite:
//
//	hostguard snapshot -o before.json
//	go test ./...
//	hostguard snapshot -o after.json
//	hostguard diff before.json after.json   # exit 1, naming each difference
//
// HOSTGUARD_RUN=<id> in the environment marks the run's processes: one
// still carrying it at the second snapshot was left running by the suite.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/ironic-go/ironic-agent/internal/testbed/hostguard"
)

const usage = `usage:
  hostguard snapshot [-root DIR] [-netns PATH] [-mark ENV=VALUE] [-o FILE]
  hostguard diff BEFORE AFTER
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run returns the exit status: 0 no difference, 1 a difference that fails
// the run, 2 a usage or I/O error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "snapshot":
		return snapshot(ctx, args[1:], stdout, stderr)
	case "diff":
		return diff(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "hostguard: unknown command %q\n%s", args[0], usage)
	return 2
}

func snapshot(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("snapshot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o hostguard.Options
	fs.StringVar(&o.Root, "root", "/", "directory below which etc, proc, sys and run are read")
	fs.StringVar(&o.NetNS, "netns", "", "network namespace file to record (default: this process's)")
	mark := ""
	if v, ok := os.LookupEnv("HOSTGUARD_RUN"); ok {
		mark = "HOSTGUARD_RUN=" + v
	}
	fs.StringVar(&o.Mark, "mark", mark, "environment entry that marks the run's processes")
	out := fs.String("o", "", "write the snapshot here instead of standard output")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "hostguard: not root: files only root may read (/etc/shadow, other users' processes) are compared by name only")
	}
	s, err := hostguard.Take(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	w := stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintf(stderr, "hostguard: %v\n", err)
			return 2
		}
		defer f.Close()
		w = f
	}
	if err := s.Write(w); err != nil {
		fmt.Fprintf(stderr, "hostguard: writing the snapshot: %v\n", err)
		return 2
	}
	return 0
}

func readSnapshot(path string) (*hostguard.Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := hostguard.Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func diff(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	before, err := readSnapshot(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "hostguard: %v\n", err)
		return 2
	}
	after, err := readSnapshot(args[1])
	if err != nil {
		fmt.Fprintf(stderr, "hostguard: %v\n", err)
		return 2
	}
	for _, s := range after.Skipped {
		fmt.Fprintf(stdout, "hostguard: not checked: %s\n", s)
	}
	failed := 0
	for _, d := range hostguard.Diff(before, after) {
		if d.Fails {
			failed++
			fmt.Fprintf(stdout, "hostguard: CHANGED BY THE RUN: %s\n", d)
		} else {
			fmt.Fprintf(stdout, "hostguard: note (does not fail the run): %s\n", d)
		}
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "hostguard: %d changes to the host (snapshots %s and %s)\n", failed, args[0], args[1])
		return 1
	}
	fmt.Fprintf(stdout, "hostguard: the host is as it was (%d items compared)\n", len(after.Items))
	return 0
}
