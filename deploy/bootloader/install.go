package bootloader

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/raid"
	"github.com/ironic-go/ironic-agent/internal/efivar"
	"github.com/ironic-go/ironic-agent/internal/logging"
)

// Request is image.install_bootloader's GRUB installation onto the install
// disk the caller chose (as the image writer chose it).
type Request struct {
	Disk string // the install disk, a whole disk or an md array
	// Guard confines the writes: GRUB writes the MBR and the embedding
	// area of Disk (nil: blockdev.NewGuard(nil)).
	Guard          *blockdev.Guard
	RootUUID       string // filesystem UUID or PARTUUID of the root partition
	EFIUUID        string // the ESP's, "" for BIOS
	PRePUUID       string // the PReP partition's (ppc64 BIOS), ""
	TargetBootMode string
	CPUArch        string
	// RamdiskUEFI is set when the ramdisk itself booted in UEFI mode: only
	// then are NVRAM entries made.
	RamdiskUEFI bool
	// RAID opens the machine's software RAID system; it is asked for only
	// when Disk is an md array.
	RAID func() (*raid.System, error)
	// UEFIVars returns the store boot entries are written to and whether
	// the ramdisk can write it (IPA's test: efibootmgr is there; here:
	// efivarfs is mounted). Asked for on a UEFI ramdisk only, each time
	// entries are about to be made. Nil: none can be written.
	UEFIVars func() (efivar.Store, bool)
	// Grub is the installer (nil: NewGrub(Log)); tests replace its mounts.
	// Its EFIBootSetup and NVRAM are set here.
	Grub *Grub
	Log  *slog.Logger
}

// Install is IPA's _install_grub2 with the disk work around it: for a
// software RAID install device, the holder disks (each gets GRUB), their
// BIOS boot partitions (IPA's prepare_boot_partitions_for_softraid for
// BIOS; for UEFI, Grub.Install makes the ESP mirror) and the arrays'
// UUIDs for dracut; then GRUB, with the NVRAM entries of a UEFI ramdisk.
func Install(ctx context.Context, r Request) error {
	if r.Guard == nil {
		r.Guard = blockdev.NewGuard(nil)
	}
	r.Log = logging.OrDiscard(r.Log)
	// grub-install writes the MBR and the embedding area: the same guard
	// as every other write, checked before anything is mounted from it.
	if err := r.Guard.Check(r.Disk); err != nil {
		return GrubError(r.Disk, err)
	}
	var holders, mdUUIDs []string
	var sys *raid.System
	if raid.IsMDDevice(r.Disk) {
		var err error
		if sys, holders, mdUUIDs, err = prepareSoftRAID(ctx, r); err != nil {
			return err
		}
	}
	gi := r.Grub
	if gi == nil {
		gi = NewGrub(r.Log)
	}
	gi.EFIBootSetup = func(ctx context.Context) (bool, error) {
		// IPA's _efi_boot_setup: only a UEFI ramdisk with efibootmgr can
		// make NVRAM entries; here, one with efivarfs.
		if !r.RamdiskUEFI {
			return false, nil
		}
		store, ok := r.uefiVars()
		if !ok {
			return false, nil
		}
		return SetupUEFI(ctx, r.Log, store, r.Disk, r.EFIUUID, r.RAID)
	}
	if sys != nil && r.RamdiskUEFI {
		if store, ok := r.uefiVars(); ok {
			gi.NVRAM = &store
		}
	}
	return gi.Install(ctx, GrubRequest{
		Disk: r.Disk, Holders: holders, MDUUIDs: mdUUIDs, RAID: sys, RootUUID: r.RootUUID, EFIUUID: r.EFIUUID, PRePUUID: r.PRePUUID,
		TargetBootMode: r.TargetBootMode, CPUArch: r.CPUArch, RamdiskBIOS: !r.RamdiskUEFI,
	})
}

// prepareSoftRAID readies the holder disks of the md array r.Disk: GRUB's
// core image needs a BIOS boot partition on each GPT holder for a BIOS
// install. It returns the RAID system, the holders and the arrays' UUIDs.
func prepareSoftRAID(ctx context.Context, r Request) (sys *raid.System, holders, mdUUIDs []string, err error) {
	if r.RAID == nil {
		return nil, nil, nil, DeviceNotFound(fmt.Errorf("software RAID device %s: no RAID system to examine it", r.Disk))
	}
	if sys, err = r.RAID(); err != nil {
		return nil, nil, nil, err
	}
	if holders = sys.HolderDisks(r.Disk); len(holders) == 0 {
		return nil, nil, nil, DeviceNotFound(fmt.Errorf("software RAID device %s: no holder disks found", r.Disk))
	}
	if r.EFIUUID == "" {
		if err := sys.AddBIOSBootPartitions(ctx, holders); err != nil {
			return nil, nil, nil, err
		}
	}
	if mdUUIDs, err = sys.ArrayUUIDs(ctx); err != nil {
		return nil, nil, nil, err
	}
	return sys, holders, mdUUIDs, nil
}

func (r Request) uefiVars() (efivar.Store, bool) {
	if r.UEFIVars == nil {
		return efivar.Store{}, false
	}
	return r.UEFIVars()
}

// SetupUEFI makes the NVRAM boot entries in store for the image on dev (the
// agent's manage_uefi): ManageUEFI, with dev's RAID system when dev is an
// md array (raidSystem opens it).
func SetupUEFI(ctx context.Context, log *slog.Logger, store efivar.Store, dev, efiPartUUID string, raidSystem func() (*raid.System, error)) (bool, error) {
	var sys *raid.System
	if raid.IsMDDevice(dev) {
		if raidSystem == nil {
			return false, DeviceNotFound(fmt.Errorf("software RAID device %s: no RAID system to examine it", dev))
		}
		var err error
		if sys, err = raidSystem(); err != nil {
			return false, err
		}
	}
	return ManageUEFI(ctx, log, store, dev, efiPartUUID, sys)
}
