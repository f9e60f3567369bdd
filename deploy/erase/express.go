package erase

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/inventory"
)

// EraseDevicesExpress is the erase_devices_express step. IPA (master)
// formats an NVMe namespace and gives everything else the metadata wipe;
// this agent does the same with two additions that only add to what IPA
// guarantees: NVMe sanitize (crypto, else block erase) where the
// controller offers it, before IPA's format; and, on any other device (or
// after a failed NVMe erase) that supports discard, a secure or plain
// discard before the metadata wipe. Nothing here writes the whole device:
// the step takes seconds on any disk, as in IPA.
func (e *Eraser) EraseDevicesExpress(ctx context.Context, disks []inventory.Disk, o EraseOptions) (map[string]DeviceResult, error) {
	return e.perDevice(ctx, "erase_devices_express", disks, o, func(dev string) (DeviceResult, error) {
		return e.expressOne(ctx, dev, o)
	})
}

// perDevice runs one erase over the erasable devices (disks and their
// partitions, partitions first) after every guard and safety check has
// passed, collecting per-device results and errors.
func (e *Eraser) perDevice(ctx context.Context, step string, disks []inventory.Disk, o EraseOptions, erase func(dev string) (DeviceResult, error)) (map[string]DeviceResult, error) {
	disks, err := e.candidateDisks(disks, o)
	if err != nil {
		return nil, err
	}
	for _, d := range disks {
		if err := e.Guard.Check(d.Name); err != nil {
			return nil, err
		}
		// The disk's table covers every partition, even when the disk
		// itself is skipped below and only some partitions are wiped.
		if err := e.SafetyCheck(d.Name, o); err != nil {
			return nil, err
		}
	}
	devs, results := e.erasableDevices(disks)
	for _, dev := range devs {
		if err := e.SafetyCheck(dev, o); err != nil {
			return nil, err
		}
	}
	errs := map[string]error{}
	for _, dev := range devs {
		if err := ctx.Err(); err != nil {
			return results, err
		}
		r, err := e.timed(step, dev, func() (DeviceResult, error) { return erase(dev) })
		if err != nil {
			errs[dev] = err
			continue
		}
		results[dev] = r
	}
	if len(errs) > 0 {
		return results, &EraseError{Step: step, Errors: errs}
	}
	return results, nil
}

func (e *Eraser) expressOne(ctx context.Context, dev string, o EraseOptions) (DeviceResult, error) {
	var secureErr error
	dir, _ := blockdev.SysBlockDir(e.root(), dev)
	partition := dir != "" && blockdev.IsPartition(dir)
	if !partition && strings.HasPrefix(filepath.Base(dev), "nvme") && o.EnableNVMeSecureErase {
		r, err := e.nvmeExpress(ctx, dev)
		if err == nil {
			return r, nil
		}
		e.log().Error("NVMe secure erase failed, falling back", "device", dev, "error", err)
		secureErr = err
	}
	var details []string
	if secureErr != nil {
		details = append(details, "NVMe secure erase failed: "+secureErr.Error())
	}
	discarded, err := e.discard(ctx, dev)
	switch {
	case errors.Is(err, blockdev.ErrNotSupported):
		// No discard: IPA's metadata wipe alone, as on a spinning disk.
	case err != nil:
		// IPA never discards, so a failed discard costs nothing of what
		// IPA guarantees: the metadata wipe still runs.
		e.log().Warn("discard failed, the metadata wipe still runs", "device", dev, "error", err)
		details = append(details, "discard failed: "+err.Error())
	}
	if err := ctx.Err(); err != nil {
		return DeviceResult{}, err
	}
	n, werr := blockdev.WipeMetadata(ctx, e.Guard, dev)
	if werr != nil {
		if secureErr != nil {
			return DeviceResult{}, fmt.Errorf("secure erase failed: %v; fallback to metadata erase also failed: %w", secureErr, werr)
		}
		return DeviceResult{}, werr
	}
	method := MethodMetadata
	switch discarded {
	case discardSecure:
		method = MethodSecureDiscardMetadata
	case discardPlain:
		method = MethodDiscardMetadata
	}
	return DeviceResult{Method: method, Bytes: n, Detail: strings.Join(details, "; ")}, nil
}

// discardKind is what discard did.
type discardKind int

const (
	discardNone discardKind = iota
	discardPlain
	discardSecure
)

// discard tells the device that every block of dev is unused, as
// `blkdiscard --secure` and then `blkdiscard` would: a secure discard
// (BLKSECDISCARD) when the device takes one, else a plain discard
// (BLKDISCARD). It runs only where queue/discard_max_bytes > 0 and
// returns ErrNotSupported otherwise; a device without discard (a
// spinning disk, a SAS HDD with only WRITE SAME) is never zeroed in
// full here, however cheap the kernel says write-zeroes is, because
// WRITE SAME on a spinning disk takes as long as writing it.
//
// The kernel exposes no sysfs attribute for secure discard, so, as
// blkdiscard does, the ioctl is tried and EOPNOTSUPP (or EINVAL from
// older kernels) means "not offered". What a discarded block reads back
// as is up to the device, so the caller still wipes the metadata.
func (e *Eraser) discard(ctx context.Context, dev string) (discardKind, error) {
	dir, err := blockdev.SysBlockDir(e.root(), dev)
	if err != nil {
		return discardNone, err
	}
	discardMax, _ := blockdev.ReadSysInt(filepath.Join(blockdev.QueueDir(dir), "discard_max_bytes"))
	if discardMax <= 0 {
		return discardNone, fmt.Errorf("%s: %w (queue/discard_max_bytes=%d)", dev, blockdev.ErrNotSupported, discardMax)
	}
	d, err := blockdev.Open(e.Guard, dev)
	if err != nil {
		return discardNone, err
	}
	defer d.Close()
	ioctl := e.rangeIoctl
	if ioctl == nil {
		ioctl = blockdev.IoctlRange
	}
	size := uint64(d.Size)
	if err := ctx.Err(); err != nil {
		return discardNone, err
	}
	err = ioctl(d.File, unix.BLKSECDISCARD, 0, size)
	if err == nil {
		return discardSecure, nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EINVAL) {
		e.log().Warn("secure discard failed, trying a plain discard", "device", dev, "error", err)
	}
	if err := ctx.Err(); err != nil {
		return discardNone, err
	}
	if err := ioctl(d.File, unix.BLKDISCARD, 0, size); err != nil {
		return discardNone, fmt.Errorf("BLKDISCARD %s (bytes 0-%d): %w", dev, size, err)
	}
	return discardPlain, nil
}
