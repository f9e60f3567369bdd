package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/ironic-go/ironic-agent/internal/version"
)

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "", "Print the agent version (the one Ironic sees, from the VERSION file), the build (the version with\nthe commit when not built from its clean release tag), the commit and the Go version.", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	commit := version.Commit()
	if commit == "" {
		commit = "unknown"
	}
	fmt.Fprintf(stdout, "ironic-agent %s (build %s, commit %s, %s, %s/%s)\n", version.Version(), version.Build(), commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
