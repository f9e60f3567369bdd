package raid

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/partition"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/inventory/hints"
)

// GiB is size_gb's unit.
const GiB = 1 << 30

// ESPMiB is the size of the EFI system partition IPA makes on each holder
// for UEFI (raid_utils.ESP_SIZE_MIB), and the room kept for it.
const ESPMiB = 550

// Holder is a disk the arrays are built on.
type Holder struct {
	Name   string // /dev/sda
	Size   int64  // bytes
	Sector int    // logical sector size in bytes
}

// DiskPlan is the partition table written on one holder disk.
type DiskPlan struct {
	Holder
	Label      string // "gpt" or "msdos"
	Partitions []partition.PlannedPartition
}

// Volume is one md array to create.
type Volume struct {
	// Device is the md device, /dev/mdN.
	Device string
	// Name is the array name (--name): volume_name, else mdN.
	Name string
	// Level is mdadm's level ("10" for Ironic's "1+0").
	Level string
	// Components are the partitions the array is made of, one per holder.
	Components []string
	// Holders are the disks of the components, in the same order.
	Holders []string
	// LogicalDisk is the entry of the configuration it comes from.
	LogicalDisk LogicalDisk
}

// Plan is what create_configuration does: a table on each holder disk,
// then the arrays in order.
type Plan struct {
	BootMode string // "bios" or "uefi"
	Label    string // "gpt" or "msdos"
	Disks    []DiskPlan
	Volumes  []Volume
}

// raidStart is where the first RAID partition of each holder starts
// (IPA's calculate_raid_start): after 551 MiB kept for the ESP on UEFI;
// after 8 MiB kept for a BIOS boot partition on GPT; else at the first
// aligned sector sgdisk -F reports on a fresh msdos label, 1 MiB.
func raidStart(bootMode, label string) int64 {
	switch {
	case bootMode == "uefi":
		return (ESPMiB + 1) * blockdev.MiB
	case label == "gpt":
		return 8 * blockdev.MiB
	}
	return blockdev.MiB
}

// usableEnd is the end (exclusive, in bytes) parted's "-1" gives a
// partition with -a optimal: the 1 MiB grain boundary at or before the
// last usable sector (the disk's last, or the last before the backup GPT),
// so that sector itself is never used even when the disk is a whole
// number of MiB (checked against parted on loop devices).
func usableEnd(h Holder, label string) int64 {
	s := int64(h.Sector)
	last := h.Size/s - 1
	if label == "gpt" {
		last -= 1 + (16384+s-1)/s // backup header and entries
	}
	grain := blockdev.MiB / s
	if grain < 1 {
		grain = 1
	}
	return last / grain * grain * s
}

// HoldersFor is IPA's get_block_devices_for_raid: for each logical disk,
// the disks its physical_disks hints pick (each hint the first matching
// disk not already picked for that volume), or every disk when it has
// none. It returns the holders of each logical disk and all of them,
// each once, in first-use order.
func HoldersFor(disks []inventory.Disk, lds []LogicalDisk) (perVolume [][]string, all []string, err error) {
	hd := hints.Disks(disks)
	for _, ld := range lds {
		var matching []string
		if len(ld.PhysicalDisks) > 0 {
			for _, raw := range ld.PhysicalDisks {
				h, err := hints.ParseRootDeviceHints(raw)
				if err != nil {
					return nil, nil, softwareRAIDError(err, "physical disk hints %s: %v", hintString(raw), err)
				}
				var found []hints.Disk
				if !h.IsEmpty() {
					if found, err = hints.FindDisksByHints(hd, h); err != nil {
						return nil, nil, softwareRAIDError(err, "physical disk hints %s: %v", h, err)
					}
				}
				if len(found) == 0 {
					return nil, nil, softwareRAIDError(nil, "No candidates for physical disk %s from the list %s", hintString(raw), diskNames(disks))
				}
				picked := ""
				var cands []string
				for _, d := range found {
					cands = append(cands, d.Name)
					if picked == "" && !slices.Contains(matching, d.Name) {
						picked = d.Name
					}
				}
				if picked == "" {
					return nil, nil, softwareRAIDError(nil, "No candidates left for physical disk %s from the list %v after picking %v for previous volumes", hintString(raw), cands, matching)
				}
				matching = append(matching, picked)
			}
		} else {
			for _, d := range disks {
				matching = append(matching, d.Name)
			}
		}
		for _, m := range matching {
			if !slices.Contains(all, m) {
				all = append(all, m)
			}
		}
		perVolume = append(perVolume, matching)
	}
	return perVolume, all, nil
}

func hintString(raw map[string]any) string {
	h, err := hints.ParseRootDeviceHints(raw)
	if err != nil {
		return fmt.Sprint(raw)
	}
	return h.String()
}

func diskNames(disks []inventory.Disk) []string {
	var out []string
	for _, d := range disks {
		out = append(out, d.Name)
	}
	return out
}

// mdadmLevel is the level as mdadm spells it.
func mdadmLevel(level string) string {
	if level == "1+0" {
		return "10"
	}
	return level
}

// MakePlan is the partitioning and array half of IPA's
// _do_create_configuration for logical disks already validated: the MAX
// volume moves last; on each holder the first RAID partition starts at
// raidStart and ends at size_gb GiB from the disk's start (IPA's parted
// end, so it is smaller than size_gb by the lead-in), each later one
// starts where the previous ended and is size_gb GiB long, and MAX runs to
// the end of the disk. Arrays are numbered in that order from the first
// md index not in taken; the k-th partition of a holder is its k-th
// array's member.
func MakePlan(lds []LogicalDisk, disks []inventory.Disk, holders map[string]Holder, bootMode, label string, taken []string) (Plan, error) {
	if bootMode != "bios" && bootMode != "uefi" {
		return Plan{}, softwareRAIDError(nil, "unsupported boot mode %q: want bios or uefi", bootMode)
	}
	if label != "gpt" && label != "msdos" {
		return Plan{}, softwareRAIDError(nil, "unsupported partition table type %q: want gpt or msdos", label)
	}
	var ordered []LogicalDisk
	var maxLD []LogicalDisk
	for _, ld := range lds {
		if ld.Max {
			maxLD = append(maxLD, ld)
		} else {
			ordered = append(ordered, ld)
		}
	}
	ordered = append(ordered, maxLD...)
	perVolume, all, err := HoldersFor(disks, ordered)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{BootMode: bootMode, Label: label}
	idx := map[string]int{}
	for _, name := range all {
		h, ok := holders[name]
		if !ok {
			return Plan{}, softwareRAIDError(nil, "holder disk %s: size and sector size unknown", name)
		}
		if h.Sector <= 0 || h.Size <= 0 {
			return Plan{}, softwareRAIDError(nil, "holder disk %s: size %d bytes, sector %d bytes", name, h.Size, h.Sector)
		}
		idx[name] = len(p.Disks)
		p.Disks = append(p.Disks, DiskPlan{Holder: h, Label: label})
	}
	// cursor is where the next partition of each disk starts; first
	// tells whether it is still the lead-in start (end = size_gb GiB).
	cursor := map[string]int64{}
	first := map[string]bool{}
	for _, name := range all {
		cursor[name] = raidStart(bootMode, label)
		first[name] = true
	}
	next := 0
	for i, ld := range ordered {
		if n := len(perVolume[i]); n < minHolders(ld.Level) {
			return Plan{}, softwareRAIDError(nil, "RAID level %s needs at least %d holder disks, the volume %s has %d (%v)", ld.Level, minHolders(ld.Level), volumeLabel(ld, i), n, perVolume[i])
		}
		for slices.Contains(taken, "/dev/md"+strconv.Itoa(next)) {
			next++
		}
		v := Volume{Device: "/dev/md" + strconv.Itoa(next), Name: ld.VolumeName, Level: mdadmLevel(ld.Level), LogicalDisk: ld}
		if !ld.hasVolumeName {
			v.Name = "md" + strconv.Itoa(next)
		}
		next++
		for _, name := range perVolume[i] {
			dp := &p.Disks[idx[name]]
			start := cursor[name]
			var end int64
			switch {
			case ld.Max:
				end = usableEnd(dp.Holder, label)
			case first[name]:
				end = ld.SizeGB * GiB
			default:
				end = start + ld.SizeGB*GiB
			}
			if end <= start {
				return Plan{}, softwareRAIDError(nil, "volume %s on %s: its partition would end at %d MiB, not after its start at %d MiB (size_gb %d counts from the start of the disk for a disk's first volume)",
					volumeLabel(ld, i), name, end/blockdev.MiB, start/blockdev.MiB, ld.SizeGB)
			}
			if end > usableEnd(dp.Holder, label) {
				return Plan{}, softwareRAIDError(nil, "volume %s on %s: its partition would end at %d MiB, past the %d MiB the disk holds", volumeLabel(ld, i), name, end/blockdev.MiB, usableEnd(dp.Holder, label)/blockdev.MiB)
			}
			if label == "msdos" && end/int64(dp.Sector) > 1<<32 {
				return Plan{}, softwareRAIDError(nil, "volume %s on %s ends at %d MiB, beyond the 2 TiB an msdos label can address", volumeLabel(ld, i), name, end/blockdev.MiB)
			}
			num := len(dp.Partitions) + 1
			dp.Partitions = append(dp.Partitions, partition.PlannedPartition{Role: v.Name, Number: num, Start: start, Size: end - start})
			v.Components = append(v.Components, blockdev.PartitionPath(name, num))
			v.Holders = append(v.Holders, name)
			cursor[name], first[name] = end, false
		}
		p.Volumes = append(p.Volumes, v)
	}
	return p, nil
}

func volumeLabel(ld LogicalDisk, i int) string {
	if ld.hasVolumeName {
		return strconv.Quote(ld.VolumeName)
	}
	return fmt.Sprintf("#%d", i)
}

// BootPartition is the partition IPA adds to each holder when it deploys
// onto the arrays (prepare_boot_partitions_for_softraid), in the room
// raidStart kept: for UEFI an ESP of ESPMiB at the first free aligned
// sector (1 MiB), type ef00, named uefi-holder-<n>, the holders' ESPs
// then mirrored by an md RAID-1 with metadata 1.0 (ESPMetadata) so the
// firmware reads each as a plain FAT; for BIOS on GPT a 2 MiB BIOS boot
// partition (ef02) named bios-boot-part-<n>; nothing for BIOS on msdos.
// n is the holder's position; number the partition's.
func BootPartition(bootMode, label string, n, number int) (partition.PlannedPartition, string, bool) {
	switch {
	case bootMode == "uefi":
		return partition.PlannedPartition{Role: partition.RoleESP, Number: number, Start: blockdev.MiB, Size: ESPMiB * blockdev.MiB, FSType: "fat32", Flags: []string{"boot"}},
			"uefi-holder-" + strconv.Itoa(n), true
	case label == "gpt":
		return partition.PlannedPartition{Role: partition.RoleBIOSBoot, Number: number, Start: blockdev.MiB, Size: 2 * blockdev.MiB, Flags: []string{"bios_grub"}},
			"bios-boot-part-" + strconv.Itoa(n), true
	}
	return partition.PlannedPartition{}, "", false
}

// Metadata versions IPA gives the arrays: data arrays "1" (mdadm's 1.2,
// the superblock 4 KiB from the start of each member), whatever the boot
// mode, as the boot loader reads /boot through the md driver; the UEFI
// ESP mirror 1.0, the superblock at the end, so that each member starts
// with the FAT the firmware reads without knowing md.
const (
	DataMetadata = "1"
	ESPMetadata  = "1.0"
)
