package bootloader

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode/utf16"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/raid"
	"github.com/ironic-go/ironic-agent/internal/efivar"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// This file is IPA 2023.1's UEFI part of install_bootloader
// (efi_utils.manage_uefi): find the EFI system partition on the disk the
// image went to, look for boot loaders on it, and create NVRAM boot entries
// for them. IPA runs efibootmgr for the entries; this agent writes the same
// Boot#### and BootOrder variables through efivarfs in Go (internal/efivar,
// whose tests hold efibootmgr's own bytes), so the ramdisk needs no
// efibootmgr.

// espPartition is an EFI system partition found on a disk, with what a
// boot entry's hard drive node says about it.
type espPartition struct {
	number int
	path   string
	hd     efivar.HardDrive
}

// findESP finds the EFI system partition of dev (blockdev.FindESP) and the
// hard drive node a boot entry for it carries.
func findESP(dev string, partUUID string) (*espPartition, error) {
	e, err := blockdev.FindESP(dev, partUUID)
	if err != nil || e == nil {
		return nil, err
	}
	hd := efivar.HardDrive{PartitionNumber: uint32(e.Number), Start: e.Start, Size: e.Size,
		MBRType: efivar.PartitionMBR, SignatureType: efivar.SignatureMBR}
	if e.GPT {
		hd.MBRType, hd.SignatureType, hd.Signature = efivar.PartitionGPT, efivar.SignatureGUID, e.GUID
	} else {
		// efibootmgr 17 uses the disk signature as it is, zero included
		// (its -w writes none on such a disk either).
		binary.LittleEndian.PutUint32(hd.Signature[:4], e.MBRSignature)
	}
	return &espPartition{number: e.Number, path: e.Path, hd: hd}, nil
}

// efiLoaderNames are the files IPA recognises as boot loaders or as
// pointers to one (BOOT*.CSV, used by shim), plus shim's arm64 CSV
// (BOOTAA64.CSV beside shimaa64.efi), without which an arm64 image's
// entry would name grubaa64.efi and skip shim.
func efiLoaderNames() []string {
	return []string{"bootx64.csv", "bootaa64.csv", "boot.csv", "bootia32.efi", "bootx64.efi", "bootia64.efi", "bootarm.efi",
		"bootaa64.efi", "bootriscv32.efi", "bootriscv64.efi", "bootriscv128.efi", "grubaa64.efi", "winload.efi"}
}

// findEFILoaders walks the mounted ESP: a CSV file wins alone, else every
// executable known loader, as paths relative to the ESP root.
func findEFILoaders(root string) ([]string, error) {
	var found []string
	var csv string
	known := map[string]bool{}
	for _, n := range efiLoaderNames() {
		known[n] = true
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !known[strings.ToLower(d.Name())] {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if strings.Contains(strings.ToLower(d.Name()), "csv") {
			csv = rel
			return fs.SkipAll
		}
		if info, err := d.Info(); err == nil && info.Mode()&0o111 != 0 {
			found = append(found, rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if csv != "" {
		return []string{csv}, nil
	}
	return found, nil
}

// decodeUTF16 decodes UTF-16 text (with or without BOM, little-endian by
// default), as shim's BOOT*.CSV files are.
func decodeUTF16(b []byte) string {
	bigEndian := false
	if len(b) >= 2 && b[0] == 0xfe && b[1] == 0xff {
		bigEndian, b = true, b[2:]
	} else if len(b) >= 2 && b[0] == 0xff && b[1] == 0xfe {
		b = b[2:]
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		if bigEndian {
			u[i] = binary.BigEndian.Uint16(b[2*i:])
		} else {
			u[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
	}
	return string(utf16.Decode(u))
}

// efiEntry is one boot loader to register.
type efiEntry struct {
	loader string // \EFI\debian\shimx64.efi
	label  string
}

// efiEntries turns the loaders found into NVRAM entries: a CSV names the
// loader (in its own directory) and the label; other loaders are labelled
// ironic1, ironic2, ...
func efiEntries(root string, loaders []string) ([]efiEntry, error) {
	var out []efiEntry
	for i, l := range loaders {
		if strings.Contains(strings.ToLower(l), "csv") {
			b, err := os.ReadFile(filepath.Join(root, l))
			if err != nil {
				return nil, err
			}
			fields := strings.SplitN(strings.TrimSpace(decodeUTF16(b)), ",", 4)
			if len(fields) < 2 || fields[0] == "" {
				return nil, fmt.Errorf("boot loader hint %s: want \"<loader>,<label>,...\", got %q", l, strings.Join(fields, ","))
			}
			p := filepath.Join(filepath.Dir(l), fields[0])
			out = append(out, efiEntry{loader: `\` + strings.ReplaceAll(p, "/", `\`), label: fields[1]})
			continue
		}
		out = append(out, efiEntry{loader: `\` + strings.ReplaceAll(l, "/", `\`), label: fmt.Sprintf("ironic%d", i+1)})
	}
	return out, nil
}

// registerEFI writes a boot entry per loader, each first in BootOrder,
// after removing the entries whose label matches, as IPA's _run_efibootmgr
// does with efibootmgr: it deletes every record whose `efibootmgr -v` line
// (label, tab, device path) contains the label, then creates the entry.
func registerEFI(ctx context.Context, log *slog.Logger, store efivar.Store, esp *espPartition, entries []efiEntry) error {
	for _, e := range entries {
		opt := efivar.LoadOption{Attributes: efivar.LoadOptionActive, Description: e.label,
			FilePath: efivar.DevicePath{esp.hd.Node(), efivar.FilePathNode(e.loader)}}
		num, err := store.ReplaceBootOption(ctx, opt, func(old efivar.BootEntry) bool {
			if strings.Contains(old.Option.Description+"\t"+old.Option.FilePath.String(), e.label) {
				log.Info("replacing UEFI boot entry with the same label", "entry", efivar.BootName(old.Num),
					"label", old.Option.Description, "path", old.Option.FilePath.String())
				return true
			}
			return false
		})
		if err != nil {
			return err
		}
		log.Info("UEFI boot entry written", "entry", efivar.BootName(num), "label", e.label, "path", opt.FilePath.String())
	}
	return nil
}

// firmwareCannotSee says why firmware could never boot from dev (a loop
// device, or no block device at all), or "" when it might.
func firmwareCannotSee(dev string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(dev, &st); err != nil {
		return err.Error()
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFBLK {
		return "not a block device"
	}
	// Major 7 is the loop driver's (Documentation/admin-guide/devices.txt).
	if major := (st.Rdev >> 8) & 0xfff; major == 7 {
		return "a loop device"
	}
	return ""
}

// ManageUEFI is IPA's efi_utils.manage_uefi: it sets up NVRAM boot entries
// in store for the boot loaders on dev's ESP (efiPartUUID, or found by
// type). It returns false (and no error) when the ESP holds no boot loader,
// so the caller goes on as IPA does. When dev is an md array (software
// RAID, sys its system) the ESP the image carries inside the array is
// moved to a mirror of ESPs on its holder disks, which the firmware can
// read (relocateESP), and each holder's ESP gets its own entries, the
// labels suffixed "(RAID, part<n>)".
func ManageUEFI(ctx context.Context, log *slog.Logger, store efivar.Store, dev string, efiPartUUID string, sys *raid.System) (bool, error) {
	esp, err := findESP(dev, efiPartUUID)
	if err != nil {
		return false, DeviceNotFound(err)
	}
	if esp == nil {
		return false, ipaerror.New("DeviceNotFound", 404, "Error finding the disk or partition device to deploy the image onto",
			fmt.Sprintf("No EFI partition could be detected on device %s and EFI partition UUID has not been recorded during deployment "+
				"(which is often the case for whole disk images). Are you using a UEFI-compatible image?", dev))
	}
	dir, err := os.MkdirTemp("", "ironic-agent-esp-")
	if err != nil {
		return false, err
	}
	defer os.Remove(dir)
	if err := syscall.Mount(esp.path, dir, "vfat", syscall.MS_NOSUID|syscall.MS_NODEV, ""); err != nil {
		hint := ""
		if errors.Is(err, syscall.ENODEV) {
			hint = " (the kernel has no vfat: load the vfat, nls_cp437 and nls_ascii modules)"
		}
		return false, fmt.Errorf("mount %s (EFI system partition of %s) on %s: %w%s", esp.path, dev, dir, err, hint)
	}
	mounted := true
	defer func() {
		if mounted {
			_ = syscall.Unmount(dir, 0)
		}
	}()
	loaders, err := findEFILoaders(dir)
	if err != nil {
		return false, fmt.Errorf("looking for boot loaders on %s: %w", esp.path, err)
	}
	if len(loaders) == 0 {
		log.Warn("empty EFI system partition", "partition", esp.path)
		return false, nil
	}
	entries, err := efiEntries(dir, loaders)
	if err != nil {
		return false, err
	}
	if err := syscall.Unmount(dir, 0); err != nil {
		return false, fmt.Errorf("unmount %s: %w", dir, err)
	}
	mounted = false
	syscall.Sync()
	if !raid.IsMDDevice(dev) || sys == nil {
		return writeEntries(ctx, log, store, dev, esp, entries)
	}
	_, holders, err := relocateESP(ctx, log, sys, dev, esp.path)
	if err != nil {
		return false, err
	}
	return writeHolderEntries(ctx, log, store, holders, entries)
}

// writeHolderEntries writes entries for each holder's ESP, the labels
// suffixed "(RAID, part<n>)"; it reports whether any was written.
func writeHolderEntries(ctx context.Context, log *slog.Logger, store efivar.Store, holders []holderESP, entries []efiEntry) (bool, error) {
	written := false
	for i, h := range holders {
		es := slices.Clone(entries)
		for j := range es {
			// Unique labels per holder, as IPA's, so that one holder's
			// entry does not replace another's.
			es[j].label = fmt.Sprintf("%s (RAID, part%d)", es[j].label, i)
		}
		ok, err := writeEntries(ctx, log, store, h.disk, h.esp, es)
		if err != nil {
			return false, err
		}
		written = written || ok
	}
	return written, nil
}

// raidBootEntries registers the boot loaders grub-install put on the ESP
// mirror (mounted at mnt) once per holder's ESP, as manage_uefi does for
// the ESP of a whole-disk image: the firmware boots either disk through
// its own entry. IPA leaves a partition image's entries to the image's
// grub-install and efibootmgr, which name one ESP at most.
func raidBootEntries(ctx context.Context, log *slog.Logger, store efivar.Store, mnt string, holders []holderESP) error {
	loaders, err := findEFILoaders(mnt)
	if err != nil {
		return fmt.Errorf("looking for boot loaders on the ESP mirror: %w", err)
	}
	if len(loaders) == 0 {
		log.Warn("grub-install left no boot loader on the ESP mirror: no UEFI boot entries written")
		return nil
	}
	entries, err := efiEntries(mnt, loaders)
	if err != nil {
		return err
	}
	_, err = writeHolderEntries(ctx, log, store, holders, entries)
	return err
}

// writeEntries registers entries for the loaders on esp, the ESP of the
// disk dev, unless the firmware could never boot dev; it reports whether
// it wrote them.
func writeEntries(ctx context.Context, log *slog.Logger, store efivar.Store, dev string, esp *espPartition, entries []efiEntry) (bool, error) {
	for _, e := range entries {
		log.Info("adding UEFI boot entry", "device", dev, "partition", esp.number, "loader", e.loader, "label", e.label)
	}
	if store.Dir == efivar.DefaultDir {
		if why := firmwareCannotSee(dev); why != "" {
			// An entry would only put a disk the firmware cannot find at
			// the head of this machine's boot order: what an agent
			// confined to loop devices on a test host would do.
			log.Warn("not writing UEFI boot entries: the firmware cannot boot from this device", "device", dev, "why", why)
			return false, nil
		}
	}
	if err := registerEFI(ctx, log, store, esp, entries); err != nil {
		return false, ipaerror.ExecutionError(fmt.Errorf("could not configure UEFI boot on device %s: %w", dev, err))
	}
	return true, nil
}
