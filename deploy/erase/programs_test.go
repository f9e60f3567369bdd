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
