package bootloader

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/raid"
)

// holderESP is the ESP on one holder disk of a software RAID install
// device, a member of the ESP mirror.
type holderESP struct {
	disk string
	esp  *espPartition
}

// relocateESP is the UEFI half of IPA's prepare_boot_partitions_for_softraid
// as manage_uefi calls it: firmware cannot read an ESP inside an md array
// (src, the image's, on md), so its files move to the ESP mirror on the
// holder disks (made unless one exists: IPA's find_esp_raid), formatted
// with src's volume ID and label so the image's fstab still names it;
// src is then wiped so the deployed system mounts the mirror, not it. It
// returns the mirror and the holders' ESPs, in the mirror's member order.
func relocateESP(ctx context.Context, log *slog.Logger, sys *raid.System, md, src string) (string, []holderESP, error) {
	holders := sys.HolderDisks(md)
	if len(holders) == 0 {
		return "", nil, fmt.Errorf("software RAID device %s: no holder disks found", md)
	}
	id, err := fatIdentity(src)
	if err != nil {
		return "", nil, err
	}
	mirror, err := sys.FindESPMirror()
	if err != nil {
		return "", nil, err
	}
	if mirror != "" {
		log.Info("found RAIDed ESP, not creating one", "device", mirror)
	} else {
		log.Info("creating EFI partitions on the software RAID holder disks", "holders", holders)
		if mirror, err = sys.CreateESPMirror(ctx, holders); err != nil {
			return "", nil, err
		}
	}
	log.Info(EventRelocatingESP, "from", src, "to", mirror, "identity", id)
	if err := sys.FormatESP(mirror, id); err != nil {
		return "", nil, err
	}
	if err := copyESP(src, mirror); err != nil {
		return "", nil, err
	}
	if _, err := blockdev.WipeMetadata(ctx, sys.Guard, src); err != nil {
		return "", nil, fmt.Errorf("erasing the EFI partition %s after relocating it: %w", src, err)
	}
	var out []holderESP
	for _, member := range sys.Components(mirror) {
		disk := sys.HolderDisk(member)
		esp, err := findESP(disk, "")
		if err != nil {
			return "", nil, DeviceNotFound(err)
		}
		if esp == nil {
			return "", nil, DeviceNotFound(fmt.Errorf("holder disk %s of the ESP mirror %s: no EFI system partition in its table", disk, mirror))
		}
		out = append(out, holderESP{disk: disk, esp: esp})
	}
	if len(out) == 0 {
		return "", nil, fmt.Errorf("the ESP mirror %s has no members", mirror)
	}
	return mirror, out, nil
}

// fatIdentity reads the volume ID and label of the FAT on part (nil when
// it carries none, and the mirror is labelled as IPA labels a fresh one).
func fatIdentity(part string) (*raid.FATIdentity, error) {
	f, err := os.Open(part)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 512)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("reading the boot sector of %s: %w", part, err)
	}
	if id, ok := raid.ReadFATIdentity(b); ok {
		return &id, nil
	}
	return nil, nil
}

// copyESP copies every file of the FAT on src to the one on dst, both
// mounted for the copy in temporary directories.
func copyESP(src, dst string) (err error) {
	from, err := os.MkdirTemp("", "ironic-agent-esp-src-")
	if err != nil {
		return err
	}
	defer os.Remove(from)
	to, err := os.MkdirTemp("", "ironic-agent-esp-dst-")
	if err != nil {
		return err
	}
	defer os.Remove(to)
	if err := syscall.Mount(src, from, "vfat", syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, ""); err != nil {
		return fmt.Errorf("mount %s (the image's EFI partition) on %s: %w", src, from, err)
	}
	defer func() {
		if uerr := syscall.Unmount(from, 0); uerr != nil && err == nil {
			err = fmt.Errorf("unmount %s: %w", from, uerr)
		}
	}()
	if err := syscall.Mount(dst, to, "vfat", syscall.MS_NOSUID|syscall.MS_NODEV, ""); err != nil {
		return fmt.Errorf("mount %s (the ESP mirror) on %s: %w", dst, to, err)
	}
	if err := copyTree(from, to); err != nil {
		_ = syscall.Unmount(to, 0)
		return fmt.Errorf("copying the EFI partition %s to %s: %w", src, dst, err)
	}
	if err := syscall.Unmount(to, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", to, err)
	}
	syscall.Sync()
	return nil
}
