package raid

import (
	"context"
	"slices"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// Delete is IPA's delete_configuration: every md array the agent may
// touch is removed (data wiped, array stopped, member superblocks
// zeroed, holder tables wiped), except those the node skips by
// volume_name and their neighbours, which are kept or wiped as
// DecideSkips says; then every remaining md superblock on the disks and
// their partitions is zeroed. Two passes at most, as IPA: an array still
// there after the second fails the step. It returns the decision per
// array.
func (s *System) Delete(ctx context.Context, req Request) (map[string]string, error) {
	skip := SkipVolumeNames(req.Node)
	arrays, err := s.scan(ctx)
	if err != nil {
		return nil, err
	}
	var actions map[string]string
	for pass := 1; ; pass++ {
		if actions, err = s.deletePass(ctx, req, arrays, skip); err != nil {
			return nil, err
		}
		if arrays, err = s.scan(ctx); err != nil {
			return nil, err
		}
		if len(skip) > 0 {
			arrays = slices.DeleteFunc(arrays, func(md string) bool { return actions[md] != ActionDelete })
		}
		if len(arrays) == 0 {
			break
		}
		if pass == 2 {
			return nil, softwareRAIDError(nil, "Unable to clean all softraid correctly. Remaining %v", arrays)
		}
	}
	s.log().Debug("finished deleting software RAID")
	return actions, nil
}

// scan assembles what can be assembled, then lists the arrays.
func (s *System) scan(ctx context.Context) ([]string, error) {
	s.Assemble(ctx)
	arrays, err := s.Arrays()
	if err != nil {
		return nil, softwareRAIDError(err, "%v", err)
	}
	return arrays, nil
}

// deletePass is IPA's _delete_config_pass.
func (s *System) deletePass(ctx context.Context, req Request, arrays, skip []string) (map[string]string, error) {
	d := SkipDecision{Actions: map[string]string{}}
	for _, md := range arrays {
		d.Actions[md] = ActionDelete
	}
	if len(skip) > 0 {
		d = s.DecideSkips(ctx, arrays, skip)
	}
	var holders []string
	keepMembers := map[string]bool{}
	dropParts := map[string][]int{}
	for _, md := range arrays {
		members := s.Components(md)
		if len(members) == 0 {
			s.log().Info("software RAID cleaning is skipping a device without members", "device", md)
			continue
		}
		for _, h := range s.HolderDisks(md) {
			if !slices.Contains(holders, h) {
				holders = append(holders, h)
			}
		}
		if act := d.Actions[md]; act != ActionDelete {
			for _, m := range members {
				keepMembers[m] = true
			}
			switch act {
			case ActionKeep:
				s.log().Warn("software RAID device is not going to be deleted", "device", md, "volume_name", d.VolumeNames[md], "because_of", d.Cause[md])
			case ActionWipe:
				s.log().Warn("software RAID device is not going to be deleted because a device on the skip list shares its holder disk; wiping it", "device", md, "because_of", d.Cause[md])
				if err := s.wipe(ctx, md); err != nil {
					s.log().Warn("failed to wipe", "device", md, "error", err)
				}
			}
			continue
		}
		s.log().Info("deleting software RAID device", "device", md)
		if err := s.wipe(ctx, md); err != nil {
			s.log().Warn("failed to wipe", "device", md, "error", err)
		}
		if _, err := s.mdadm(ctx, "--stop", md); err != nil {
			s.log().Warn("failed to stop", "device", md, "error", err)
		}
		for _, m := range members {
			member, err := s.isMDMember(m)
			if err != nil {
				return nil, softwareRAIDError(err, "Failed to examine device %s: %v", m, err)
			}
			if !member {
				continue
			}
			if err := s.zeroSuperblock(ctx, m); err != nil {
				s.log().Warn("failed to remove superblock", "device", m, "error", err)
			}
			if len(skip) > 0 {
				h := s.HolderDisk(m)
				if n := s.partitionNumber(m); n > 0 && h != m {
					dropParts[h] = append(dropParts[h], n)
				}
			}
		}
		s.log().Info("deleted software RAID device", "device", md)
	}

	// Superblocks left from arrays that are gone or never assembled:
	// partitions before their disks (zeroing a disk's superblock first
	// can make mdadm refuse the partition's).
	var all []string
	for _, disk := range physicalDisks(req.Disks) {
		all = append(all, disk.Name)
		all = append(all, blockdev.PartitionsOf(s.root(), disk.Name)...)
	}
	slices.Reverse(all)
	keepDisks := map[string]bool{}
	for _, dev := range all {
		if keepMembers[dev] {
			keepDisks[s.HolderDisk(dev)] = true
			continue
		}
		if keepDisks[dev] {
			continue
		}
		member, err := s.isMDMember(dev)
		if err != nil {
			s.log().Warn("failed to examine device", "device", dev, "error", err)
			continue
		}
		if member {
			if err := s.zeroSuperblock(ctx, dev); err != nil {
				s.log().Warn("failed to remove superblock", "device", dev, "error", err)
			}
		}
	}

	for _, h := range holders {
		if keepDisks[h] {
			if nums := dropParts[h]; len(nums) > 0 {
				s.log().Warn("holder disk carries a volume on the skip list; deleting only some partitions", "device", h, "partitions", nums)
				if err := s.deletePartitions(ctx, h, nums); err != nil {
					return nil, softwareRAIDError(err, "delete partitions %v of %s: %v", nums, h, err)
				}
			} else {
				s.log().Warn("holder disk carries only volumes on the skip list", "device", h)
			}
			continue
		}
		s.log().Info("removing partitions on holder disk", "device", h)
		if err := s.wipe(ctx, h); err != nil {
			s.log().Warn("failed to remove partitions", "device", h, "error", err)
		}
	}
	return d.Actions, nil
}

// zeroSuperblock is `mdadm --zero-superblock`, refused by the guard for a
// device the agent may not write.
func (s *System) zeroSuperblock(ctx context.Context, dev string) error {
	if err := s.check(dev); err != nil {
		return err
	}
	_, err := s.mdadm(ctx, "--zero-superblock", dev)
	return err
}
