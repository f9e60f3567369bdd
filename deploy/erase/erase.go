package erase

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/ata"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/inventory/hints"
	"golang.org/x/sync/errgroup"
)

// Erase methods as reported per device.
const (
	MethodSkippedRAIDMember     = "skipped: linux RAID member"
	MethodSkippedReadOnly       = "skipped: read-only"
	MethodSkippedVirtualMedia   = "skipped: virtual media"
	MethodMetadata              = "metadata wipe"
	MethodATAEnhanced           = "ATA enhanced security erase"
	MethodATA                   = "ATA security erase"
	MethodNVMeCrypto            = "NVMe format, cryptographic erase (ses=2)"
	MethodNVMeUserData          = "NVMe format, user data erase (ses=1)"
	MethodNVMeSanitizeCrypto    = "NVMe sanitize, crypto erase"
	MethodNVMeSanitizeBlock     = "NVMe sanitize, block erase"
	MethodOverwrite             = "overwrite"
	MethodSecureDiscardMetadata = "secure discard + metadata wipe"
	MethodDiscardMetadata       = "discard + metadata wipe"
)

// DeviceResult says what was done to one device.
type DeviceResult struct {
	Method string `json:"method"`
	// Detail adds specifics: passes written, the fallback reason.
	Detail string `json:"detail,omitempty"`
	// Bytes is how many bytes were written by the agent itself (0 when
	// the drive did the work).
	Bytes int64 `json:"bytes"`
	// Seconds is how long the erase of this device took, to the
	// millisecond (0 for a skipped device). IPA returns no per-device
	// result; Ironic stores clean_result without reading it (only the RAID
	// steps' hooks read theirs), so this key costs Ironic nothing.
	Seconds float64 `json:"seconds"`
}

// timed runs one device's erase, records its duration in the result and
// logs what was done: method, detail, bytes written, seconds; or the
// error after the same time.
func (e *Eraser) timed(step, dev string, erase func() (DeviceResult, error)) (DeviceResult, error) {
	start := time.Now()
	r, err := erase()
	r.Seconds = math.Round(time.Since(start).Seconds()*1000) / 1000
	if err != nil {
		e.log().Error("device erase failed", "step", step, "device", dev, "seconds", r.Seconds, "error", err)
		return r, err
	}
	e.log().Info(EventDeviceEraseFinished, "step", step, "device", dev, "method", r.Method, "detail", r.Detail, "bytes", r.Bytes, "seconds", r.Seconds)
	return r, nil
}

// Progress reports an overwrite pass: pass counts from 1; done and total
// are bytes of that pass.
type Progress func(dev string, pass, passes int, done, total int64)

// Eraser runs the erase clean steps.
type Eraser struct {
	Guard  *blockdev.Guard
	Runner blockdev.Runner // no program left to run here; ExecRunner in production
	// Root is where /sys, /proc and /dev/disk are read ("" = "/").
	Root     string
	Logger   *slog.Logger
	Progress Progress
	// ataPasser sends the ATA commands (nil: ata.SGIO); the ATA decision
	// table tests simulate a drive.
	ataPasser ata.Passer
	// rangeIoctl issues BLKSECDISCARD and BLKDISCARD (nil:
	// blockdev.IoctlRange); the express decision-table tests fake it.
	rangeIoctl func(f *os.File, req uint, off, length uint64) error
	// nvmeOpen opens an NVMe namespace for admin commands (nil:
	// nvme.Open); the NVMe decision-table tests fake the controller.
	nvmeOpen func(dev string) (nvmeDevice, error)
	// probe reads a device's signature (nil: blockdev.Probe); tests fake
	// a failing disk with it.
	probe func(dev string) (string, error)
	// sanitizePoll is how often a running NVMe sanitize is polled
	// (0: defaultSanitizePoll); tests shorten it.
	sanitizePoll time.Duration
}

func (e *Eraser) root() string {
	if e.Root == "" {
		return "/"
	}
	return e.Root
}

func (e *Eraser) log() *slog.Logger {
	return logging.OrDiscard(e.Logger)
}

// candidateDisks applies the guard and the node's skip list.
func (e *Eraser) candidateDisks(disks []inventory.Disk, o EraseOptions) ([]inventory.Disk, error) {
	hd := hints.Disks(disks)
	kept, skipped, err := hints.SkipBlockDevices(hd, o.SkipBlockDevices)
	if err != nil {
		return nil, err
	}
	if len(skipped) > 0 {
		e.log().Warn("skipping devices on the node's skip_block_devices list", "devices", skipped)
	}
	var out []inventory.Disk
	for _, d := range kept {
		out = append(out, d.Disk)
	}
	return out, nil
}

// skipReason returns why a device is not erased at all ("" = erase it):
// virtual media, RAID members (of the device or one of its partitions).
func (e *Eraser) skipReason(dev string) string {
	if target, err := filepath.EvalSymlinks(filepath.Join(e.root(), "dev/disk/by-label/ir-vfd-dev")); err == nil {
		if r, err := filepath.EvalSymlinks(dev); err == nil && r == target {
			return MethodSkippedVirtualMedia
		}
	}
	probe := e.probe
	if probe == nil {
		probe = blockdev.Probe
	}
	for _, d := range append([]string{dev}, blockdev.PartitionsOf(e.root(), dev)...) {
		sig, err := probe(d)
		if errors.Is(err, syscall.EIO) {
			// The disk answered, with a media error: that says nothing
			// about RAID, and skipping would pass the step with the disk
			// unerased and called a RAID member. IPA asks lsblk (udev's
			// record), never the failing sectors, and goes on to erase;
			// so does this, and the erase either rewrites the sectors
			// (a disk remaps them on write) or fails naming them.
			e.log().Warn("cannot read the device to probe for RAID membership (I/O error); erasing it", "device", d, "error", err)
			continue
		}
		if err != nil {
			// IPA treats "cannot tell" as a member, to be safe.
			e.log().Warn("cannot probe for RAID membership; not erasing", "device", d, "error", err)
			return MethodSkippedRAIDMember
		}
		if sig == "linux_raid_member" {
			return MethodSkippedRAIDMember
		}
	}
	return ""
}

func (e *Eraser) readOnly(dev string) bool {
	dir, err := blockdev.SysBlockDir(e.root(), dev)
	if err != nil {
		return false
	}
	n, err := blockdev.ReadSysInt(filepath.Join(dir, "ro"))
	return err == nil && n == 1
}

// guardedIDs are the partition types whose filesystems are shared between
// machines (IPA's safety_check_block_device). lsblk prints GUIDs in lower
// case, so they are compared without regard to case.
var guardedIDs = map[string]string{
	"37affc90-ef7d-4e96-91c3-2d7ae055b174": "IBM GPFS Partition",
	"aa31e02a-400f-11db-9590-000c2911d1b8": "VMware VMFS Partition (GPT)",
}

// ProtectedDeviceError refuses to erase a device holding a shared-disk
// cluster filesystem.
type ProtectedDeviceError struct {
	Device, What string
}

func (e *ProtectedDeviceError) Error() string {
	return fmt.Sprintf("refusing to erase %s: it holds a %s, which other machines may share; "+
		"set the node's driver_internal_info.wipe_special_filesystems to false to erase it anyway", e.Device, e.What)
}

// SafetyCheck refuses devices that hold GPFS, VMFS or GFS2 (IPA 7.4). It
// looks at the device, its partition table and every partition, which is
// stricter than IPA's look at the device's own lsblk line. As in IPA,
// either the agent's guard_special_filesystems=false or the node's
// wipe_special_filesystems=false turns it off.
func (e *Eraser) SafetyCheck(dev string, o EraseOptions) error {
	if !o.GuardSpecialFilesystems || !o.WipeSpecialFilesystems {
		return nil
	}
	sector := 512
	dir, err := blockdev.SysBlockDir(e.root(), dev)
	if err == nil {
		if n, err := blockdev.ReadSysInt(filepath.Join(blockdev.QueueDir(dir), "logical_block_size")); err == nil && n > 0 {
			sector = int(n)
		}
		if blockdev.IsPartition(dir) {
			// A partition's type and GUID live in its disk's table, which
			// is checked with the disk; its first sector is a boot sector
			// that must not be read as a table. Only its own superblock.
			if sig, err := blockdev.Probe(dev); err == nil && sig == "gfs2" {
				return &ProtectedDeviceError{dev, "Red Hat Global File System 2"}
			}
			return nil
		}
	}
	t, err := blockdev.ReadPartTable(dev, sector)
	if err != nil {
		return fmt.Errorf("safety check of %s: %w", dev, err)
	}
	if what, ok := guardedIDs[strings.ToLower(t.DiskGUID)]; ok {
		return &ProtectedDeviceError{dev, what}
	}
	for _, p := range t.Partitions {
		for _, id := range []string{p.TypeGUID, p.GUID} {
			if what, ok := guardedIDs[strings.ToLower(id)]; ok {
				return &ProtectedDeviceError{dev, what}
			}
		}
		if t.Kind == "dos" && p.MBRType == 0xfb {
			return &ProtectedDeviceError{dev, "VMware VMFS Partition (MBR)"}
		}
	}
	for _, d := range append([]string{dev}, blockdev.PartitionsOf(e.root(), dev)...) {
		if sig, err := blockdev.Probe(d); err == nil && sig == "gfs2" {
			return &ProtectedDeviceError{dev, "Red Hat Global File System 2"}
		}
	}
	return nil
}

// EraseError collects per-device failures of a step.
type EraseError struct {
	Step   string
	Errors map[string]error
}

func (e *EraseError) Error() string {
	names := make([]string, 0, len(e.Errors))
	for n := range e.Errors {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s: %v", n, e.Errors[n])
	}
	return fmt.Sprintf("%s failed on %d device(s): %s", e.Step, len(names), strings.Join(parts, "; "))
}

// EraseDevices is the erase_devices clean step: every disk (no
// partitions) gets the strongest erase it supports.
func (e *Eraser) EraseDevices(ctx context.Context, disks []inventory.Disk, o EraseOptions) (map[string]DeviceResult, error) {
	disks, err := e.candidateDisks(disks, o)
	if err != nil {
		return nil, err
	}
	results := map[string]DeviceResult{}
	if len(disks) == 0 {
		return results, nil
	}
	// All safety checks first: one protected disk stops the step before
	// anything is erased.
	for _, d := range disks {
		if err := e.Guard.Check(d.Name); err != nil {
			return nil, err
		}
		if err := e.SafetyCheck(d.Name, o); err != nil {
			return nil, err
		}
	}
	workers := max(1, min(o.Concurrency, len(disks)))
	var mu sync.Mutex
	errs := map[string]error{}
	// Every device is erased even when another fails, so the goroutines
	// record their errors per device and return nil to the group.
	var g errgroup.Group
	g.SetLimit(workers)
	for _, d := range disks {
		g.Go(func() error {
			r, err := e.timed("erase_devices", d.Name, func() (DeviceResult, error) {
				return e.EraseBlockDevice(ctx, d.Name, o)
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[d.Name] = err
				return nil
			}
			results[d.Name] = r
			return nil
		})
	}
	_ = g.Wait() // always nil: errors are per device, in errs
	if len(errs) > 0 {
		return results, &EraseError{Step: "erase_devices", Errors: errs}
	}
	return results, nil
}

// EraseBlockDevice is IPA's erase_block_device for one disk: skip virtual
// media and RAID members, refuse or skip read-only devices, NVMe format or
// ATA secure erase when enabled, else (or after a permitted secure-erase
// failure) overwrite passes.
func (e *Eraser) EraseBlockDevice(ctx context.Context, dev string, o EraseOptions) (DeviceResult, error) {
	if err := e.Guard.Check(dev); err != nil {
		return DeviceResult{}, err
	}
	if why := e.skipReason(dev); why != "" {
		e.log().Info("not erasing device", "device", dev, "reason", why)
		return DeviceResult{Method: why}, nil
	}
	if e.readOnly(dev) {
		if o.SkipReadOnly {
			return DeviceResult{Method: MethodSkippedReadOnly}, nil
		}
		return DeviceResult{}, fmt.Errorf("device %s is flagged read-only and the node does not permit skipping it (agent_erase_skip_read_only)", dev)
	}
	var secureErr error
	if strings.HasPrefix(filepath.Base(dev), "nvme") {
		if o.EnableNVMeSecureErase {
			r, err := e.nvmeErase(ctx, dev)
			if err == nil {
				return r, nil
			}
			secureErr = err
		}
	} else if o.EnableATASecureErase {
		r, supported, err := e.ataErase(ctx, dev)
		if err == nil && supported {
			return r, nil
		}
		secureErr = err
	}
	detail := ""
	if secureErr != nil {
		if !o.ContinueIfSecureEraseFailed {
			return DeviceResult{}, fmt.Errorf("secure erase of %s failed and falling back to overwriting is not enabled (agent_continue_if_secure_erase_failed): %w", dev, secureErr)
		}
		e.log().Warn("secure erase failed, overwriting instead", "device", dev, "error", secureErr)
		detail = "secure erase failed: " + secureErr.Error() + "; "
	}
	r, err := e.Overwrite(ctx, dev, o.Iterations, o.Zeroize)
	r.Detail = detail + r.Detail
	return r, err
}
