package erase

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/programs"
)

// Without hdparm every SATA disk would look as if it had no ATA security
// and be overwritten: ATA erase must fail naming the program instead.
func TestATAEraseRefusesWithoutHdparm(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	e := &Eraser{Guard: blockdev.NewGuard([]string{"/dev/sdx"}), Runner: blockdev.ExecRunner{}}
	_, supported, err := e.ataErase(context.Background(), "/dev/sdx")
	var missing *programs.MissingError
	if !supported || !errors.As(err, &missing) {
		t.Fatalf("supported %v, error %v; want a refusal naming hdparm", supported, err)
	}
	for _, want := range []string{"/dev/sdx", `"hdparm -I /dev/sdx"`, "program hdparm (Debian package hdparm) is not in this ramdisk"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

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
