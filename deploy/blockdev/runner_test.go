package blockdev

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/programs"
)

func TestCommandErrorNamesEverything(t *testing.T) {
	_, err := runCommand(context.Background(), "sh", "-c", "echo bad thing >&2; exit 3")
	var ce *CommandError
	if !errors.As(err, &ce) || ce.ExitCode != 3 || !strings.Contains(err.Error(), `"sh -c echo bad thing >&2; exit 3" failed (exit status 3): bad thing`) {
		t.Errorf("got %v", err)
	}
}

// A name the registry does not list never runs, even one on PATH.
func TestExecRunnerRefusesUnregistered(t *testing.T) {
	_, err := ExecRunner{}.Run(context.Background(), "sh", "-c", "exit 0")
	var ue *programs.UnregisteredError
	if !errors.As(err, &ue) || ue.Name != "sh" || !strings.Contains(err.Error(), `"sh -c exit 0"`) {
		t.Errorf("got %v", err)
	}
}

// A registered program that is not installed fails naming the program,
// its package, the feature and the command line.
func TestExecRunnerMissingProgram(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := ExecRunner{}.Run(context.Background(), "mkfs.ext4", "-q", "/dev/vda3")
	var me *programs.MissingError
	if !errors.As(err, &me) {
		t.Fatalf("got %v, want a *programs.MissingError", err)
	}
	for _, want := range []string{`"mkfs.ext4 -q /dev/vda3"`, "program mkfs.ext4 (Debian package e2fsprogs) is not in this ramdisk", "the ephemeral partition"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
