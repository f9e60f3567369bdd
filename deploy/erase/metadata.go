package erase

import (
	"context"
	"sort"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/inventory"
)

// erasableDevices is IPA's _list_erasable_devices: disks and their
// partitions, sorted by name descending so a partition is wiped before
// its disk's table disappears, minus virtual media, RAID members and
// read-only devices.
func (e *Eraser) erasableDevices(disks []inventory.Disk) ([]string, map[string]DeviceResult) {
	skipped := map[string]DeviceResult{}
	var devs []string
	for _, d := range disks {
		devs = append(devs, d.Name)
		devs = append(devs, blockdev.PartitionsOf(e.root(), d.Name)...)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(devs)))
	var out []string
	for _, dev := range devs {
		why := e.skipReason(dev)
		if why == "" && e.readOnly(dev) {
			why = MethodSkippedReadOnly
		}
		if why != "" {
			e.log().Info("not erasing device", "device", dev, "reason", why)
			skipped[dev] = DeviceResult{Method: why}
			continue
		}
		out = append(out, dev)
	}
	return out, skipped
}

// EraseDevicesMetadata is the erase_devices_metadata step.
func (e *Eraser) EraseDevicesMetadata(ctx context.Context, disks []inventory.Disk, o EraseOptions) (map[string]DeviceResult, error) {
	return e.perDevice(ctx, "erase_devices_metadata", disks, o, func(dev string) (DeviceResult, error) {
		n, err := blockdev.WipeMetadata(ctx, e.Guard, dev)
		return DeviceResult{Method: MethodMetadata, Bytes: n}, err
	})
}
