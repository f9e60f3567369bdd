package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/ironic-go/ironic-agent/internal/version"
)

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "", "Print the agent version, the commit it was built from and the Go version.", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	commit := version.Commit()
	if commit == "" {
		commit = "unknown"
	}
	fmt.Fprintf(stdout, "ironic-agent %s (commit %s, %s, %s/%s)\n", version.Version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
