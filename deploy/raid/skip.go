package raid

import (
	"context"
	"slices"

	"github.com/ironic-go/ironic-agent/inventory"
)

// What the delete step does with an existing array when the node skips
// volumes by name (IPA's _handle_raid_skip_list).
const (
	// ActionDelete removes the array, its superblocks and its holders'
	// partitions.
	ActionDelete = "delete"
	// ActionWipe keeps the array but wipes its data: it shares a holder
	// with a skipped array.
	ActionWipe = "wipe"
	// ActionKeep leaves the array alone: it is skipped, or it is the ESP
	// mirror on a holder of a skipped array.
	ActionKeep = "keep"
)

// SkipDecision is the outcome of the skip list over the existing arrays.
type SkipDecision struct {
	// Actions maps each array to ActionDelete, ActionWipe or ActionKeep.
	Actions map[string]string
	// VolumeNames maps each array to its name ("" when it has none).
	VolumeNames map[string]string
	// Cause maps a wiped (or kept ESP) array to the skipped volume that
	// shares its holder.
	Cause map[string]string
}

// DecideSkips is IPA's _handle_raid_skip_list: an array whose name is on
// the skip list is kept; every other array sharing a holder disk with it
// is wiped rather than deleted; the ESP mirror ("esp") is kept even then,
// so the boot loader still finds it.
func (s *System) DecideSkips(ctx context.Context, arrays []string, skip []string) SkipDecision {
	d := SkipDecision{Actions: map[string]string{}, VolumeNames: map[string]string{}, Cause: map[string]string{}}
	onHolder := map[string][]string{}
	skipped := map[string]bool{}
	esp := ""
	for _, md := range arrays {
		d.Actions[md] = ActionDelete
		for _, h := range s.HolderDisks(md) {
			onHolder[h] = append(onHolder[h], md)
		}
		name := s.VolumeName(ctx, md)
		if name == "esp" {
			esp = md
		}
		d.VolumeNames[md] = name
		if name != "" {
			s.log().Info("software RAID device has a volume name", "device", md, "name", name)
			if slices.Contains(skip, name) {
				s.log().Warn("RAID device will not be deleted: its volume name is on the skip list", "device", md, "name", name)
				skipped[md] = true
			}
		}
	}
	for _, md := range arrays {
		if !skipped[md] {
			continue
		}
		d.Actions[md] = ActionKeep
		for _, h := range s.HolderDisks(md) {
			for _, other := range onHolder[h] {
				if other != md && d.Actions[other] == ActionDelete {
					d.Actions[other] = ActionWipe
					d.Cause[other] = d.VolumeNames[md]
				}
			}
		}
	}
	if esp != "" && d.Actions[esp] == ActionWipe {
		d.Actions[esp] = ActionKeep
	}
	return d
}

// WithoutSkippedArrays is the volume_name half of IPA's
// list_block_devices_check_skip_list: the disks minus the md arrays the
// node's skip_block_devices keeps by name and, with includeWipe (the
// erase steps), minus those wiped beside them, so that no erase or
// deploy touches an array it was told to keep. Without volume_name
// entries nothing is asked of mdadm.
func (s *System) WithoutSkippedArrays(ctx context.Context, node map[string]any, disks []inventory.Disk, includeWipe bool) ([]inventory.Disk, error) {
	skip := SkipVolumeNames(node)
	if len(skip) == 0 {
		return disks, nil
	}
	arrays, err := s.Arrays()
	if err != nil {
		return nil, softwareRAIDError(err, "%v", err)
	}
	d := s.DecideSkips(ctx, arrays, skip)
	var out []inventory.Disk
	for _, disk := range disks {
		switch d.Actions[disk.Name] {
		case ActionKeep:
			s.log().Info("not using an md array on the skip list", "device", disk.Name, "volume_name", d.VolumeNames[disk.Name])
			continue
		case ActionWipe:
			if includeWipe {
				s.log().Info("not erasing an md array that shares a holder with one on the skip list", "device", disk.Name, "because_of", d.Cause[disk.Name])
				continue
			}
		}
		out = append(out, disk)
	}
	return out, nil
}
