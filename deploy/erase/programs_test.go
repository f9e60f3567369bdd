package erase

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/programs"
)

// Without nvme-cli the NVMe erase fails naming the program and its
// package.
func TestNVMeEraseNamesMissingNvme(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	e := &Eraser{Guard: blockdev.NewGuard([]string{"/dev/nvme9n1"}), Runner: blockdev.ExecRunner{}, Root: t.TempDir()}
	_, err := e.nvmeErase(context.Background(), "/dev/nvme9n1")
	var missing *programs.MissingError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), "program nvme (Debian package nvme-cli)") {
		t.Fatalf("got %v; want an error naming nvme-cli", err)
	}
}
