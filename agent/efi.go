package agent

import (
	"context"
	"os"

	"github.com/ironic-go/ironic-agent/deploy/bootloader"
	"github.com/ironic-go/ironic-agent/internal/efivar"
)

// manageUEFI makes the NVRAM boot entries for the image on dev in the
// agent's efivarfs (bootloader.SetupUEFI); on an md array, after moving
// its ESP to a mirror on the holder disks.
func (a *Agent) manageUEFI(ctx context.Context, dev string, efiPartUUID string) (bool, error) {
	return bootloader.SetupUEFI(ctx, a.log, a.efivars(), dev, efiPartUUID, a.generic.raidSystem)
}

// uefiVars is bootloader.Request.UEFIVars: the agent's store, and whether
// boot entries can be written to it.
func (a *Agent) uefiVars() (efivar.Store, bool) {
	ok := a.uefiVarsAvailable()
	return a.efivars(), ok
}

// efivars is where the agent reads and writes UEFI variables.
func (a *Agent) efivars() efivar.Store {
	if a.opts.EFIVars != "" {
		return efivar.Store{Dir: a.opts.EFIVars}
	}
	return efivar.Store{Dir: efivar.DefaultDir}
}

// uefiVarsAvailable reports whether boot entries can be written. IPA goes
// on without NVRAM entries when its ramdisk has no efibootmgr; the
// equivalent here is a kernel without efivarfs.
func (a *Agent) uefiVarsAvailable() bool {
	if st, err := os.Stat(a.efivars().Dir); err != nil || !st.IsDir() {
		a.log.Warn("UEFI variables are not available: no boot entries are written", "efivarfs", a.efivars().Dir)
		return false
	}
	return true
}
