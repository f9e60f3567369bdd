package raid

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/partition"
	"github.com/ironic-go/ironic-agent/internal/clock"
	"github.com/ironic-go/ironic-agent/inventory"
)

// Request is what the create and apply steps are given.
type Request struct {
	// Node is the node as Ironic sent it (properties, instance_info,
	// driver_internal_info, uuid).
	Node map[string]any
	// Disks are the disks the steps may use (the allowed devices when the
	// agent is confined); md arrays among them are not holders.
	Disks []inventory.Disk
}

// Created is what create_configuration did.
type Created struct {
	// Config is the configuration as given, the step's result (nil when
	// there was nothing to do: IPA then returns {}).
	Config map[string]any
	// Plan is what was laid out and created.
	Plan Plan
	// RootVolumes maps each created array with is_root_volume to its
	// value (IPA's _raid_root_device_mapping).
	RootVolumes map[string]bool
}

// ramdiskUEFI reports whether the ramdisk booted through UEFI.
func (s *System) ramdiskUEFI() bool {
	_, err := os.Stat(filepath.Join(s.root(), "sys/firmware/efi"))
	return err == nil
}

func nodeUUID(node map[string]any) string {
	u, _ := node["uuid"].(string)
	return u
}

// physicalDisks drops md arrays from the disks: they are not holders.
func physicalDisks(disks []inventory.Disk) []inventory.Disk {
	var out []inventory.Disk
	for _, d := range disks {
		if _, ok := mdNumber(filepath.Base(d.Name)); ok {
			continue
		}
		out = append(out, d)
	}
	return out
}

// CreateFromNode is create_configuration: the node's target_raid_config,
// nothing when it is empty.
func (s *System) CreateFromNode(ctx context.Context, req Request) (Created, error) {
	cfg, err := ParseConfig(req.Node["target_raid_config"])
	if err != nil {
		return Created{}, err
	}
	if len(cfg.Raw) == 0 {
		s.log().Debug("no target_raid_config found")
		return Created{}, nil
	}
	return s.Create(ctx, req, cfg)
}

// Create is IPA's _do_create_configuration: nothing unless a logical disk
// asks for controller "software"; then validation, the skip list (volumes
// kept by name are not created again), a check that the holder disks
// carry no partitions, a fresh table on each holder with its RAID
// partitions, and one `mdadm --create` per volume, re-adding any member
// the new array is missing.
func (s *System) Create(ctx context.Context, req Request, cfg Config) (Created, error) {
	if !cfg.Software() {
		s.log().Debug("no software RAID config found")
		return Created{}, nil
	}
	disks := physicalDisks(req.Disks)
	skip := SkipVolumeNames(req.Node)
	if err := cfg.Validate(nodeUUID(req.Node), skip, len(disks)); err != nil {
		return Created{}, err
	}
	lds := cfg.LogicalDisks
	existing, err := s.Arrays()
	if err != nil {
		return Created{}, softwareRAIDError(err, "%v", err)
	}
	removed := false
	if len(skip) > 0 && len(existing) > 0 {
		keep, err := s.ignoreOnCreate(ctx, lds, skip, existing)
		if err != nil {
			return Created{}, err
		}
		removed = len(keep) > 0
		lds = slices.DeleteFunc(slices.Clone(lds), func(ld LogicalDisk) bool { return slices.Contains(keep, ld.VolumeName) && ld.hasVolumeName })
	}
	holders := map[string]Holder{}
	for _, d := range disks {
		sector := 512
		if d.LogicalSectors != nil && *d.LogicalSectors > 0 {
			sector = *d.LogicalSectors
		}
		holders[d.Name] = Holder{Name: d.Name, Size: d.Size, Sector: sector}
	}
	bootMode := partition.NodeBootMode(req.Node, s.ramdiskUEFI())
	label := partition.NodeDiskLabel(req.Node, s.ramdiskUEFI())
	// New arrays take md numbers no array uses, the agent's or not.
	taken, err := s.MDDevices()
	if err != nil {
		return Created{}, softwareRAIDError(err, "%v", err)
	}
	plan, err := MakePlan(lds, disks, holders, bootMode, label, taken)
	if err != nil {
		return Created{}, err
	}
	if removed {
		// IPA would write fresh labels over these disks and lose the
		// volumes it was told to keep.
		for _, dp := range plan.Disks {
			for _, md := range existing {
				if slices.Contains(s.HolderDisks(md), dp.Name) {
					return Created{}, softwareRAIDError(nil, "holder disk %s carries %s, an existing array that is kept; a new volume cannot be laid out beside it without rewriting its partition table", dp.Name, md)
				}
			}
		}
	} else {
		var withParts []string
		for _, dp := range plan.Disks {
			if len(blockdev.PartitionsOf(s.root(), dp.Name)) > 0 {
				withParts = append(withParts, dp.Name)
			}
		}
		if len(withParts) > 0 {
			return Created{}, softwareRAIDError(nil, "Partitions detected on devices %s during RAID config", strings.Join(withParts, ", "))
		}
	}
	if err := s.Apply(ctx, plan); err != nil {
		return Created{}, err
	}
	out := Created{Config: cfg.Raw, Plan: plan, RootVolumes: map[string]bool{}}
	for _, v := range plan.Volumes {
		if v.LogicalDisk.IsRootVolume != nil {
			out.RootVolumes[v.Device] = *v.LogicalDisk.IsRootVolume
		}
	}
	s.log().Info("successfully created software RAID", "volumes", len(plan.Volumes))
	return out, nil
}

// Apply writes each holder's table and creates the arrays of a plan.
func (s *System) Apply(ctx context.Context, plan Plan) error {
	for _, dp := range plan.Disks {
		if err := s.check(dp.Name); err != nil {
			return softwareRAIDError(err, "holder disk %s: %v", dp.Name, err)
		}
	}
	for _, dp := range plan.Disks {
		s.log().Info("creating partition table", "device", dp.Name, "label", dp.Label, "partitions", len(dp.Partitions))
		if err := s.writeTable(ctx, dp.Name, dp.Label, dp.Partitions); err != nil {
			return softwareRAIDError(err, "Failed to create partitions on %s: %v", dp.Name, err)
		}
	}
	for _, v := range plan.Volumes {
		for _, c := range v.Components {
			if err := s.waitDevice(ctx, c); err != nil {
				return softwareRAIDError(err, "md device %s: %v", v.Device, err)
			}
		}
		if err := s.createArray(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

// CreateArgs is the mdadm command line of IPA's create_raid_device.
func CreateArgs(v Volume) []string {
	args := []string{"--create", v.Device, "--force", "--run", "--metadata=" + DataMetadata, "--level", v.Level,
		"--name", v.Name, "--raid-devices", strconv.Itoa(len(v.Components))}
	return append(args, v.Components...)
}

// createArray runs mdadm --create, then re-adds members the array does
// not list (a member still settling when the array started), three
// attempts each.
func (s *System) createArray(ctx context.Context, v Volume) error {
	s.log().Info(EventCreatingMD, "device", v.Device, "name", v.Name, "level", v.Level, "components", v.Components)
	if _, err := s.mdadm(ctx, CreateArgs(v)...); err != nil {
		return softwareRAIDError(err, "Failed to create md device %s on %s: %v", v.Device, strings.Join(v.Components, " "), err)
	}
	actual := s.Components(v.Device)
	for _, c := range v.Components {
		if slices.Contains(actual, c) {
			continue
		}
		s.log().Warn("member missing from new md device; re-adding", "device", c, "md", v.Device)
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			if _, err = s.mdadm(ctx, "--add", v.Device, c); err == nil {
				break
			}
			if attempt < 2 {
				if werr := s.sleep(ctx); werr != nil {
					return werr
				}
			}
		}
		if err != nil {
			return softwareRAIDError(err, "Failed re-add %s to %s: %v", c, v.Device, err)
		}
	}
	return nil
}

func (s *System) sleep(ctx context.Context) error {
	d := s.RetryDelay
	if d == 0 {
		d = time.Second
	}
	return clock.Sleep(ctx, d)
}

// ignoreOnCreate is IPA's _create_raid_ignore_list: with volumes skipped
// by name, every existing array must be one of the configuration's
// volumes (kept, or wiped as a neighbour of a kept one) or the kept ESP
// mirror; it returns the names of the volumes not to create again.
func (s *System) ignoreOnCreate(ctx context.Context, lds []LogicalDisk, skip, arrays []string) ([]string, error) {
	d := s.DecideSkips(ctx, arrays, skip)
	var remaining []string
	for _, md := range arrays {
		if d.VolumeNames[md] == "" {
			return nil, softwareRAIDError(nil, "A Software RAID device detected that does not have a volume name. This is not allowed because there is a volume_name hint in the property 'skip_block_devices'.")
		}
		remaining = append(remaining, d.VolumeNames[md])
	}
	var keep []string
	for _, ld := range lds {
		if !ld.hasVolumeName || !slices.Contains(remaining, ld.VolumeName) {
			continue
		}
		if slices.Contains(skip, ld.VolumeName) {
			s.log().Debug("software RAID device exists and is on the skip list: not created", "name", ld.VolumeName)
		} else {
			md := arrayNamed(d, ld.VolumeName)
			if d.Actions[md] != ActionWipe || d.Cause[md] == "" {
				return nil, softwareRAIDError(nil, "Existing Software RAID device detected that should not")
			}
		}
		remaining = slices.DeleteFunc(remaining, func(n string) bool { return n == ld.VolumeName })
		keep = append(keep, ld.VolumeName)
	}
	if slices.Contains(remaining, "esp") && d.Actions[arrayNamed(d, "esp")] == ActionKeep {
		remaining = slices.DeleteFunc(remaining, func(n string) bool { return n == "esp" })
	}
	if len(remaining) > 0 {
		return nil, softwareRAIDError(nil, "Existing Software RAID device detected that should not")
	}
	return keep, nil
}

func arrayNamed(d SkipDecision, name string) string {
	for md, n := range d.VolumeNames {
		if n == name {
			return md
		}
	}
	return ""
}
