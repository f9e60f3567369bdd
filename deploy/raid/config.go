package raid

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/pyconv"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// supportedLevel reports whether IPA builds level in software (Ironic's
// spelling: "1+0" is mdadm's "10").
func supportedLevel(level string) bool {
	switch level {
	case "0", "1", "1+0", "5", "6":
		return true
	}
	return false
}

// minHolders is each level's smallest number of holder disks. IPA itself
// checks only RAID-5 (3) and RAID-6 (4), and against the count of every
// disk rather than a volume's own; with mdadm's --force a 1-disk RAID-1
// or RAID-0 would then be made, which is no redundancy at all.
func minHolders(level string) int {
	switch level {
	case "5":
		return 3
	case "6":
		return 4
	}
	return 2
}

// LogicalDisk is one entry of target_raid_config's logical_disks.
type LogicalDisk struct {
	// SizeGB is size_gb in GiB; 0 when Max.
	SizeGB int64
	// Max is size_gb "MAX": the rest of each holder disk.
	Max bool
	// Level is raid_level as Ironic spells it ("1", "1+0", ...).
	Level string
	// Controller is controller ("software" for this package's volumes).
	Controller string
	// VolumeName is volume_name ("" when absent: mdN is used).
	VolumeName string
	// IsRootVolume is is_root_volume (nil when absent).
	IsRootVolume *bool
	// PhysicalDisks are the physical_disks hint dicts, nil when absent.
	PhysicalDisks []map[string]any

	hasVolumeName bool
	// physicalDisksError is why physical_disks is not a list of dicts
	// (reported by Validate, as IPA reports it).
	physicalDisksError string
	physicalDisksShort bool
}

// Config is a target_raid_config (or apply_configuration's raid_config).
type Config struct {
	LogicalDisks []LogicalDisk
	// Raw is the value as given: create_configuration returns it.
	Raw map[string]any
}

// softwareRAIDError is IPA's SoftwareRAIDError.
func softwareRAIDError(cause error, format string, a ...any) *ipaerror.Error {
	return ipaerror.Wrap("SoftwareRAIDError", 500, "Software RAID caused unknown error", fmt.Sprintf(format, a...), cause)
}

// ParseConfig reads a RAID configuration from its JSON value. It refuses
// only what cannot be read at all (not an object, logical_disks not a
// list of objects, size_gb neither an integer nor "MAX", a missing
// raid_level); IPA's rules are Validate's. nil or {} is an empty Config.
func ParseConfig(v any) (Config, error) {
	if v == nil {
		return Config{}, nil
	}
	raw, ok := v.(map[string]any)
	if !ok {
		return Config{}, softwareRAIDError(nil, "the RAID configuration must be an object, got %s", pyconv.Repr(v))
	}
	c := Config{Raw: raw}
	lds, ok := raw["logical_disks"]
	if !ok || lds == nil {
		return c, nil
	}
	list, ok := lds.([]any)
	if !ok {
		return Config{}, softwareRAIDError(nil, "logical_disks must be a list, got %s", pyconv.Repr(lds))
	}
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return Config{}, softwareRAIDError(nil, "logical_disks[%d] must be an object, got %s", i, pyconv.Repr(e))
		}
		ld, err := parseLogicalDisk(m)
		if err != nil {
			return Config{}, softwareRAIDError(err, "logical_disks[%d]: %v", i, err)
		}
		c.LogicalDisks = append(c.LogicalDisks, ld)
	}
	return c, nil
}

func parseLogicalDisk(m map[string]any) (LogicalDisk, error) {
	var ld LogicalDisk
	switch s := m["size_gb"].(type) {
	case nil:
		return ld, fmt.Errorf("size_gb is required")
	case string:
		if s == "MAX" {
			ld.Max = true
			break
		}
		n, err := pyconv.ParseInt(s)
		if err != nil {
			return ld, fmt.Errorf("size_gb %q is neither an integer nor \"MAX\"", s)
		}
		ld.SizeGB = n
	default:
		n, err := pyconv.Int(s)
		if err != nil {
			return ld, fmt.Errorf("size_gb: %v", err)
		}
		ld.SizeGB = n
	}
	if !ld.Max && (ld.SizeGB <= 0 || ld.SizeGB > 1<<30) {
		return ld, fmt.Errorf("size_gb %d is out of range (1 GiB to 1 EiB)", ld.SizeGB)
	}
	lvl, ok := m["raid_level"]
	if !ok || lvl == nil {
		return ld, fmt.Errorf("raid_level is required")
	}
	ld.Level = pyconv.Str(lvl)
	if c, ok := m["controller"]; ok && c != nil {
		ld.Controller = pyconv.Str(c)
	}
	if v, ok := m["volume_name"]; ok && v != nil {
		ld.VolumeName, ld.hasVolumeName = pyconv.Str(v), true
	}
	if v, ok := m["is_root_volume"]; ok && v != nil {
		b, err := pyconv.Bool(v)
		if err != nil {
			return ld, fmt.Errorf("is_root_volume: %v", err)
		}
		ld.IsRootVolume = &b
	}
	if v, ok := m["physical_disks"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			ld.physicalDisksError = "must be a list"
			ld.physicalDisksShort = true
			return ld, nil
		}
		ld.physicalDisksShort = len(list) < 2
		for _, e := range list {
			h, ok := e.(map[string]any)
			if !ok {
				ld.physicalDisksError = "must be a list of device hints (dictionaries)"
				continue
			}
			ld.PhysicalDisks = append(ld.PhysicalDisks, h)
		}
		if ld.PhysicalDisks == nil {
			ld.PhysicalDisks = []map[string]any{}
		}
	}
	return ld, nil
}

// Software reports whether any logical disk asks for software RAID
// (controller "software"); create_configuration does nothing otherwise.
func (c Config) Software() bool {
	return slices.ContainsFunc(c.LogicalDisks, func(ld LogicalDisk) bool { return ld.Controller == "software" })
}

// SkipVolumeNames is IPA's get_skip_list_from_node_for_raids: the
// volume_name of every properties.skip_block_devices entry that has one
// (nil when none does).
func SkipVolumeNames(node map[string]any) []string {
	props, _ := node["properties"].(map[string]any)
	list, _ := props["skip_block_devices"].([]any)
	var out []string
	for _, e := range list {
		m, _ := e.(map[string]any)
		if v, ok := m["volume_name"]; ok {
			if s := pyconv.Str(v); !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// Validate is IPA's validate_configuration: one or two logical disks, all
// with controller "software"; the first RAID-1; a second of a supported
// level with at most one MAX between them; RAID-5 and RAID-6 only with 3
// and 4 disks on the machine; unique volume names, required for all when
// the node skips volumes by name; one root volume at most; physical_disks
// a list of at least two hint dicts. diskCount is the number of disks the
// steps may use. Every broken rule is reported, in IPA's words.
func (c Config) Validate(nodeUUID string, skipVolumes []string, diskCount int) error {
	if len(c.LogicalDisks) == 0 {
		return softwareRAIDError(nil, "RAID config contains no logical disks")
	}
	var errs []string
	lds := c.LogicalDisks
	if len(lds) != 1 && len(lds) != 2 {
		errs = append(errs, "Software RAID configuration requires one or two logical disks")
	}
	var names []string
	root := false
	for _, ld := range lds {
		if ld.Controller != "software" {
			errs = append(errs, "Software RAID configuration requires all logical disks to have 'controller'='software'")
		}
		switch {
		case !ld.hasVolumeName:
			if len(skipVolumes) > 0 {
				errs = append(errs, "All logical disks are required to have a volume name specified as a volume name is mentioned in the property skip block devices.")
			}
		case slices.Contains(names, ld.VolumeName):
			errs = append(errs, fmt.Sprintf("Duplicate software RAID device name %s detected", ld.VolumeName))
		default:
			names = append(names, ld.VolumeName)
		}
		if ld.IsRootVolume != nil && *ld.IsRootVolume {
			if root {
				errs = append(errs, "Software RAID configuration allows only one logical disk to be marked as is_root_volume")
			}
			root = true
		}
		if ld.PhysicalDisks != nil || ld.physicalDisksError != "" {
			if ld.physicalDisksShort {
				errs = append(errs, "The physical_disks parameter for software RAID must be a list with at least 2 items, each specifying a disk in the device hints format")
			}
			if ld.physicalDisksError != "" && ld.physicalDisksError != "must be a list" {
				errs = append(errs, "The physical_disks parameter for software RAID must be a list of device hints (dictionaries)")
			}
		}
	}
	if lds[0].Level != "1" {
		errs = append(errs, "Software RAID Configuration requires RAID-1 for the first logical disk")
	}
	if len(lds) == 2 {
		if lds[0].Max && lds[1].Max {
			errs = append(errs, "Software RAID can have only one RAID device with size 'MAX'")
		}
		switch lvl := lds[1].Level; {
		case !supportedLevel(lvl):
			errs = append(errs, fmt.Sprintf("Software RAID configuration does not support RAID level %s", lvl))
		case lvl == "5" && diskCount < 3:
			errs = append(errs, fmt.Sprintf("Software RAID configuration is not possible for RAID level 5 with only %d block devices found.", diskCount))
		case lvl == "6" && diskCount < 4:
			errs = append(errs, fmt.Sprintf("Software RAID configuration is not possible for RAID level 6 with only %d block devices found.", diskCount))
		}
	}
	if len(errs) > 0 {
		return softwareRAIDError(nil, "Could not validate Software RAID config for %s: %s", nodeUUID, strings.Join(errs, "; "))
	}
	return nil
}
