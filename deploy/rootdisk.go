package deploy

import (
	"context"
	"fmt"
	"net/http"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/deploy/partition"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/inventory/hints"
)

// RootDeviceHintsOf returns the node's root-device hints as IPA reads them
// (get_os_install_device): instance_info.root_device when non-empty, else
// properties.root_device.
func RootDeviceHintsOf(node map[string]any) (*hints.RootDeviceHints, error) {
	pick := func(section string) map[string]any {
		m, _ := node[section].(map[string]any)
		h, _ := m["root_device"].(map[string]any)
		return h
	}
	raw := pick("instance_info")
	if len(raw) == 0 {
		raw = pick("properties")
	}
	h, err := hints.ParseRootDeviceHints(raw)
	if err != nil {
		return nil, fmt.Errorf("no devices could be found using the root device hints because they failed to validate: %w", err)
	}
	return h, nil
}

// InstallDevice chooses the disk an image is written to: the disks the
// guard allows (never one that is mounted or holds the running system),
// minus properties.skip_block_devices, then the root-device hints or the
// smallest disk of at least 4 GiB.
func InstallDevice(g *blockdev.Guard, disks []inventory.Disk, node map[string]any) (inventory.Disk, error) {
	rootHints, err := RootDeviceHintsOf(node)
	if err != nil {
		return inventory.Disk{}, err
	}
	opts, err := erase.EraseOptionsFromNode(node)
	if err != nil {
		return inventory.Disk{}, err
	}
	candidates, _, err := hints.SkipBlockDevices(hints.Disks(g.Filter(disks)), opts.SkipBlockDevices)
	if err != nil {
		return inventory.Disk{}, err
	}
	d, err := hints.ChooseRootDisk(candidates, rootHints)
	if err != nil {
		return inventory.Disk{}, err
	}
	return d.Disk, nil
}

// FinishWholeDisk does what IPA's prepare_image does after a whole-disk
// image is on dev: write the config drive when one was given, then return
// what standby.get_partition_uuids reports ({"root uuid": "0x..."}).
func FinishWholeDisk(ctx context.Context, g *blockdev.Guard, client *http.Client, dev, configdrive string) (map[string]any, *partition.ConfigDriveResult, error) {
	var cd *partition.ConfigDriveResult
	if configdrive != "" {
		iso, err := partition.LoadConfigDrive(ctx, client, configdrive)
		if err != nil {
			return nil, nil, err
		}
		r, err := partition.WriteConfigDrive(ctx, g, dev, iso)
		if err != nil {
			return nil, nil, fmt.Errorf("config drive on %s: %w", dev, err)
		}
		cd = &r
	}
	uuids, err := partition.PartitionUUIDs(dev)
	if err != nil {
		return nil, cd, err
	}
	return uuids, cd, nil
}
