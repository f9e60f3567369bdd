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

// EraseDevicesExpress is the erase_devices_express step: NVMe sanitize
// (crypto, else block erase) or, without sanitize, NVMe format where the
// drive supports it; else a discard followed by offloaded
// write-zeroes when the device guarantees zeroes that way; else the
// metadata wipe.
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
		r, err := erase(dev)
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
	r, err := e.DiscardZero(ctx, dev)
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, blockdev.ErrNotSupported) {
		e.log().Warn("discard/write-zeroes failed, falling back to the metadata wipe", "device", dev, "error", err)
	}
	n, werr := blockdev.WipeMetadata(ctx, e.Guard, dev)
	if werr != nil {
		if secureErr != nil {
			return DeviceResult{}, fmt.Errorf("secure erase failed: %v; fallback to metadata erase also failed: %w", secureErr, werr)
		}
		return DeviceResult{}, werr
	}
	res := DeviceResult{Method: MethodMetadata, Bytes: n}
	if secureErr != nil {
		res.Detail = "NVMe secure erase failed: " + secureErr.Error()
	}
	return res, nil
}

// DiscardZero erases a device without writing its data from the host,
// only where the result is guaranteed to read back as zeroes:
//
//   - queue/discard_zeroes_data = 1 (old kernels; the flag is always 0
//     since Linux 4.12): secure discard if offered, else discard.
//   - queue/write_zeroes_max_bytes > 0: the device offloads WRITE ZEROES;
//     discard first (secure if offered) to release the blocks, then
//     BLKZEROOUT, which guarantees zeroes.
//
// Anything else returns errNotSupported and the caller falls back.
func (e *Eraser) DiscardZero(ctx context.Context, dev string) (DeviceResult, error) {
	dir, err := blockdev.SysBlockDir(e.root(), dev)
	if err != nil {
		return DeviceResult{}, err
	}
	q := blockdev.QueueDir(dir)
	attr := func(name string) int64 {
		n, _ := blockdev.ReadSysInt(filepath.Join(q, name))
		return n
	}
	discardMax, zeroesData, writeZeroesMax := attr("discard_max_bytes"), attr("discard_zeroes_data"), attr("write_zeroes_max_bytes")
	if writeZeroesMax == 0 && !(discardMax > 0 && zeroesData == 1) {
		return DeviceResult{}, fmt.Errorf("%s: %w (discard_max_bytes=%d discard_zeroes_data=%d write_zeroes_max_bytes=%d)",
			dev, blockdev.ErrNotSupported, discardMax, zeroesData, writeZeroesMax)
	}
	d, err := blockdev.Open(e.Guard, dev)
	if err != nil {
		return DeviceResult{}, err
	}
	defer d.Close()
	if !d.IsBlock() {
		return DeviceResult{}, fmt.Errorf("%s: %w: not a block device", dev, blockdev.ErrNotSupported)
	}
	size := uint64(d.Size)
	discarded, secure := false, false
	if discardMax > 0 {
		if err := blockdev.IoctlRange(d.File, unix.BLKSECDISCARD, 0, size); err == nil {
			discarded, secure = true, true
		} else if err := blockdev.IoctlRange(d.File, unix.BLKDISCARD, 0, size); err == nil {
			discarded = true
		} else if zeroesData == 1 && writeZeroesMax == 0 {
			return DeviceResult{}, fmt.Errorf("BLKDISCARD %s: %w", dev, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return DeviceResult{}, err
	}
	method := MethodWriteZeroes
	switch {
	case discarded && secure:
		method = MethodSecureDiscardZero
	case discarded:
		method = MethodDiscardZero
	}
	if writeZeroesMax > 0 {
		if err := blockdev.IoctlRange(d.File, unix.BLKZEROOUT, 0, size); err != nil {
			return DeviceResult{}, fmt.Errorf("BLKZEROOUT %s: %w", dev, err)
		}
	} else if secure {
		method = MethodSecureDiscard
	} else {
		method = MethodDiscard
	}
	if err := blockdev.RereadPartitions(ctx, d.File); err != nil {
		return DeviceResult{}, err
	}
	return DeviceResult{Method: method}, nil
}
