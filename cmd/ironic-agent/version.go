package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/ironic-go/ironic-agent/internal/version"
)

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "", "Print the agent version (the one Ironic sees), the git describe and commit it was built from\nand the Go version.", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	commit := version.Commit()
	if commit == "" {
		commit = "unknown"
	}
	build := ""
	if d := version.Describe(); d != "" {
		build = "build " + d + ", "
	}
	fmt.Fprintf(stdout, "ironic-agent %s (%scommit %s, %s, %s/%s)\n", version.Version(), build, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
