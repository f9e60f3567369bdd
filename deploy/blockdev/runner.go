package blockdev

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/programs"
)

// Runner runs an external program where no Go path exists: mkfs.ext2/3/4
// and mkfs.xfs for partition images (deploy/partition; ATA goes through
// deploy/ata, NVMe through deploy/nvme); every name is one of
// internal/programs' registry. The interface lets the decision tables be
// tested with recorded outputs.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) (stdout []byte, err error)
}

// ExecRunner runs programs with os/exec: only those of the program
// registry (internal/programs), which the ramdisk carries. An unregistered
// name is an error before anything runs, and a registered one that is not
// installed fails with a *programs.MissingError naming its package, both
// inside a *CommandError with the command line.
type ExecRunner struct{}

// CommandError is a failed external command: its command line, exit
// status and stderr, as the step's error must show them.
type CommandError struct {
	Args     []string
	ExitCode int // -1 when it did not start or was killed
	Stderr   string
	Err      error
}

func (e *CommandError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("command %q failed (exit status %d): %s", strings.Join(e.Args, " "), e.ExitCode, msg)
}

func (e *CommandError) Unwrap() error { return e.Err }

// Run implements Runner.
func (ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	argv := append([]string{name}, args...)
	p, ok := programs.Lookup(name)
	if !ok {
		return nil, &CommandError{Args: argv, ExitCode: -1, Err: &programs.UnregisteredError{Name: name}}
	}
	if _, err := exec.LookPath(name); err != nil {
		return nil, &CommandError{Args: argv, ExitCode: -1, Err: &programs.MissingError{Program: p, Err: err}}
	}
	return runCommand(ctx, name, args...)
}

// runCommand runs name with os/exec, whatever it is.
func runCommand(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return stdout.Bytes(), &CommandError{Args: append([]string{name}, args...), ExitCode: code, Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}
