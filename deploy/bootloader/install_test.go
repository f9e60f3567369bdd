package bootloader

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/raid"
	"github.com/ironic-go/ironic-agent/internal/efivar"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// A disk the guard refuses is IPA's CommandExecutionError, before the RAID
// system, the NVRAM or GRUB are asked for anything.
func TestInstallGuardRefuses(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "missing")
	err := Install(context.Background(), Request{
		Disk:     disk,
		Guard:    blockdev.NewGuard([]string{"/dev/nonexistent-allowed"}),
		RAID:     func() (*raid.System, error) { t.Error("RAID system opened"); return nil, nil },
		UEFIVars: func() (efivar.Store, bool) { t.Error("UEFI variables asked for"); return efivar.Store{}, false },
	})
	if e := ipaerror.As(err); err == nil || e.Type != "CommandExecutionError" {
		t.Fatalf("Install on a refused disk: %v, want a CommandExecutionError", err)
	}
}

// On an md array, the RAID system is opened before anything is read, and
// its failure is returned as is.
func TestSetupUEFIRAIDSystemError(t *testing.T) {
	want := errors.New("no RAID here")
	_, err := SetupUEFI(context.Background(), nil, efivar.Store{Dir: t.TempDir()}, "/dev/md127", "", func() (*raid.System, error) { return nil, want })
	if !errors.Is(err, want) {
		t.Fatalf("SetupUEFI: %v, want %v", err, want)
	}
}
