package agent

import (
	"context"
	"errors"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/image"
	"github.com/ironic-go/ironic-agent/deploy/partition"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// preparePartitionImage is prepare_image for a partition image: the disk
// is partitioned and filled unless this agent last wrote the same image
// there (IPA's cached_image_id), and the partition UUIDs are recorded for
// get_partition_uuids.
func (a *Agent) preparePartitionImage(ctx context.Context, info *image.ImageInfo, dev, configdrive string, guard *blockdev.Guard, opts image.WriteOptions) (string, error) {
	a.mu.Lock()
	uuids := a.partitionUUIDs
	a.mu.Unlock()
	if a.images.hit(info.ID, dev) && uuids != nil {
		a.log.Info("partition image already written to the device by this agent, not writing it again", "image", info.ID, "device", dev)
		return imageWrittenMessage(info, dev, uuids), nil
	}
	a.images.forget()
	uuids, err := a.writePartitionImage(ctx, info, dev, configdrive, guard, opts)
	if err != nil {
		return "", err
	}
	a.SetPartitionUUIDs(uuids)
	a.images.written(info, dev)
	return imageWrittenMessage(info, dev, uuids), nil
}

// writePartitionImage is IPA's _write_partition_image: the layout comes
// from image_info's sizes, the boot mode and disk label from the cached
// node (as IPA reads them, so a UEFI node is never given an msdos label),
// the architecture from the inventory. The image is streamed into the root
// partition through the same verified pipeline as whole-disk images; one
// whose virtual size exceeds root_mb is IPA's InvalidCommandParamsError.
// It returns what get_partition_uuids reports.
func (a *Agent) writePartitionImage(ctx context.Context, info *image.ImageInfo, dev, configdrive string, guard *blockdev.Guard, opts image.WriteOptions) (map[string]any, error) {
	params, err := info.PartitionParams()
	if err != nil {
		return nil, err
	}
	inv, err := a.Inventory(ctx)
	if err != nil {
		return nil, err
	}
	node := a.Node()
	ramdiskUEFI := inv.Boot.CurrentBootMode == "uefi"
	layout := partition.PartitionLayout{
		RootMiB:      params.RootMiB,
		SwapMiB:      params.SwapMiB,
		EphemeralMiB: params.EphemeralMiB,
		BootMode:     partition.NodeBootMode(node, ramdiskUEFI),
		DiskLabel:    partition.NodeDiskLabel(node, ramdiskUEFI),
		CPUArch:      inv.CPU.Architecture,
	}
	client, err := a.HTTPClient(0)
	if err != nil {
		return nil, err
	}
	opts.TooLarge = func(virtualSize, _ int64) error { return image.RootTooSmall(virtualSize, params.RootMiB) }
	// Refused before the disk is touched when the image's first bytes tell
	// its size (IPA checks before work_on_disk); otherwise the write into
	// the root partition refuses it with the same error.
	if size, err := image.ImageVirtualSize(ctx, info, opts); err != nil {
		a.log.Warn("could not learn the image's size before partitioning; the write will check it", "image", info.ID, "error", err)
	} else if size > params.RootMiB<<20 {
		return nil, image.RootTooSmall(size, params.RootMiB)
	}
	a.log.Info("writing partition image", "image", info.ID, "device", dev, "boot_mode", layout.BootMode, "disk_label", layout.DiskLabel,
		"root_mb", layout.RootMiB, "swap_mb", layout.SwapMiB, "ephemeral_mb", layout.EphemeralMiB, "preserve_ephemeral", params.PreserveEphemeral)
	res, err := partition.WorkOnDisk(ctx, partition.PartitionImageOptions{
		Guard:             guard,
		Device:            dev,
		Layout:            layout,
		EphemeralFormat:   params.EphemeralFormat,
		PreserveEphemeral: params.PreserveEphemeral,
		ConfigDrive:       configdrive,
		HTTPClient:        client,
		Logger:            a.log,
		WriteRoot: func(ctx context.Context, root string) error {
			r, err := image.WriteImage(ctx, info, root, opts)
			if err != nil {
				return err
			}
			a.log.Info(r.Summary())
			return nil
		},
	})
	if err != nil {
		var de *ipaerror.Error
		if errors.As(err, &de) || ctx.Err() != nil {
			return nil, err
		}
		// IPA reports a failed mkfs or partitioning as ImageWriteError.
		ce := ipaerror.New("ImageWriteError", 500, "Error writing image to device", "Writing image to device "+dev+" failed: "+err.Error())
		ce.Err = err
		return nil, ce
	}
	uuids := res.UUIDs(inv.CPU.Architecture)
	a.log.Info(EventPartitionImageWritten, "device", dev, "partitions", uuids["partitions"], "root_uuid", res.RootUUID, "efi_system_partition_uuid", res.ESPUUID)
	return uuids, nil
}
