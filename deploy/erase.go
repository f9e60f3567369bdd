package deploy

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/inventory/hints"
)

// EraseOptions are the knobs Ironic passes in the node's
// driver_internal_info (agent_add_clean_params) and properties.
type EraseOptions struct {
	Iterations                  int  // agent_erase_devices_iterations (1)
	Zeroize                     bool // agent_erase_devices_zeroize (true)
	ContinueIfSecureEraseFailed bool // agent_continue_if_secure_erase_failed, legacy agent_continue_if_ata_erase_failed (false)
	EnableATASecureErase        bool // agent_enable_ata_secure_erase (true)
	EnableNVMeSecureErase       bool // agent_enable_nvme_secure_erase (true)
	SkipReadOnly                bool // agent_erase_skip_read_only (false)
	WipeSpecialFilesystems      bool // wipe_special_filesystems (true): false disables the shared-filesystem check
	Concurrency                 int  // disk_erasure_concurrency (1)
	// SkipBlockDevices is properties.skip_block_devices: hint dicts.
	SkipBlockDevices []map[string]any
}

// DefaultEraseOptions are IPA's defaults when the node says nothing.
func DefaultEraseOptions() EraseOptions {
	return EraseOptions{Iterations: 1, Zeroize: true, EnableATASecureErase: true,
		EnableNVMeSecureErase: true, WipeSpecialFilesystems: true, Concurrency: 1}
}

// EraseOptionsFromNode reads the options from a node document as Ironic
// sends it with clean steps (driver_internal_info and properties). A
// value of the wrong type is an error naming the key.
func EraseOptionsFromNode(node map[string]any) (EraseOptions, error) {
	o := DefaultEraseOptions()
	info, _ := node["driver_internal_info"].(map[string]any)
	boolOpt := func(key string, dst *bool) error {
		v, ok := info[key]
		if !ok || v == nil {
			return nil
		}
		b, err := asBool(v)
		if err != nil {
			return fmt.Errorf("driver_internal_info.%s: %w", key, err)
		}
		*dst = b
		return nil
	}
	intOpt := func(key string, dst *int, min int) error {
		v, ok := info[key]
		if !ok || v == nil {
			return nil
		}
		n, err := asInt(v)
		if err != nil {
			return fmt.Errorf("driver_internal_info.%s: %w", key, err)
		}
		if n < min {
			return fmt.Errorf("driver_internal_info.%s: %d is below %d", key, n, min)
		}
		*dst = n
		return nil
	}
	var errs []error
	errs = append(errs,
		intOpt("agent_erase_devices_iterations", &o.Iterations, 0),
		boolOpt("agent_erase_devices_zeroize", &o.Zeroize),
		boolOpt("agent_enable_ata_secure_erase", &o.EnableATASecureErase),
		boolOpt("agent_enable_nvme_secure_erase", &o.EnableNVMeSecureErase),
		boolOpt("agent_erase_skip_read_only", &o.SkipReadOnly),
		boolOpt("wipe_special_filesystems", &o.WipeSpecialFilesystems),
		intOpt("disk_erasure_concurrency", &o.Concurrency, 1),
	)
	// The new name wins; the legacy ATA name applies only when the new one
	// is absent (IPA's compatibility rule).
	if _, ok := info["agent_continue_if_secure_erase_failed"]; ok {
		errs = append(errs, boolOpt("agent_continue_if_secure_erase_failed", &o.ContinueIfSecureEraseFailed))
	} else {
		errs = append(errs, boolOpt("agent_continue_if_ata_erase_failed", &o.ContinueIfSecureEraseFailed))
	}
	if props, ok := node["properties"].(map[string]any); ok {
		if raw, ok := props["skip_block_devices"]; ok && raw != nil {
			list, ok := raw.([]any)
			if !ok {
				errs = append(errs, fmt.Errorf("properties.skip_block_devices: want a list of hint objects, got %T", raw))
			}
			for i, e := range list {
				m, ok := e.(map[string]any)
				if !ok {
					errs = append(errs, fmt.Errorf("properties.skip_block_devices[%d]: want an object, got %T", i, e))
					continue
				}
				o.SkipBlockDevices = append(o.SkipBlockDevices, m)
			}
		}
	}
	return o, errors.Join(errs...)
}

func asBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "1", "t", "true", "on", "y", "yes":
			return true, nil
		case "0", "f", "false", "off", "n", "no":
			return false, nil
		}
	}
	return false, fmt.Errorf("%v is not a boolean", v)
}

func asInt(v any) (int, error) {
	switch x := v.(type) {
	case float64:
		if x == float64(int(x)) {
			return int(x), nil
		}
	case int:
		return x, nil
	case json.Number:
		n, err := strconv.Atoi(x.String())
		if err == nil {
			return n, nil
		}
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		if err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%v is not an integer", v)
}

// Erase methods as reported per device.
const (
	MethodSkippedRAIDMember   = "skipped: linux RAID member"
	MethodSkippedReadOnly     = "skipped: read-only"
	MethodSkippedVirtualMedia = "skipped: virtual media"
	MethodMetadata            = "metadata wipe"
	MethodATAEnhanced         = "ATA enhanced security erase"
	MethodATA                 = "ATA security erase"
	MethodNVMeCrypto          = "NVMe format, cryptographic erase (ses=2)"
	MethodNVMeUserData        = "NVMe format, user data erase (ses=1)"
	MethodNVMeSanitizeCrypto  = "NVMe sanitize, crypto erase"
	MethodNVMeSanitizeBlock   = "NVMe sanitize, block erase"
	MethodOverwrite           = "overwrite"
	MethodSecureDiscardZero   = "secure discard + write zeroes"
	MethodDiscardZero         = "discard + write zeroes"
	MethodWriteZeroes         = "write zeroes (offloaded)"
)

// DeviceResult says what was done to one device.
type DeviceResult struct {
	Method string `json:"method"`
	// Detail adds specifics: passes written, the fallback reason.
	Detail string `json:"detail,omitempty"`
	// Bytes is how many bytes were written by the agent itself (0 when
	// the drive did the work).
	Bytes int64 `json:"bytes"`
}

// Progress reports an overwrite pass: pass counts from 1; done and total
// are bytes of that pass.
type Progress func(dev string, pass, passes int, done, total int64)

// Eraser runs the erase clean steps.
type Eraser struct {
	Guard  *Guard
	Runner Runner // hdparm and nvme-cli; ExecRunner in production
	// Root is where /sys, /proc and /dev/disk are read ("" = "/").
	Root     string
	Logger   *slog.Logger
	Progress Progress
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
	if e.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Logger
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
	for _, d := range append([]string{dev}, partitionsOf(e.root(), dev)...) {
		sig, err := probeDevice(d)
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
	dir, err := sysBlockDir(e.root(), dev)
	if err != nil {
		return false
	}
	n, err := readSysInt(filepath.Join(dir, "ro"))
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
// stricter than IPA's look at the device's own lsblk line.
func (e *Eraser) SafetyCheck(dev string, o EraseOptions) error {
	if !o.WipeSpecialFilesystems {
		return nil
	}
	sector := 512
	dir, err := sysBlockDir(e.root(), dev)
	if err == nil {
		if n, err := readSysInt(filepath.Join(queueDir(dir), "logical_block_size")); err == nil && n > 0 {
			sector = int(n)
		}
		if isPartition(dir) {
			// A partition's type and GUID live in its disk's table, which
			// is checked with the disk; its first sector is a boot sector
			// that must not be read as a table. Only its own superblock.
			if sig, err := probeDevice(dev); err == nil && sig == "gfs2" {
				return &ProtectedDeviceError{dev, "Red Hat Global File System 2"}
			}
			return nil
		}
	}
	t, err := readPartTable(dev, sector)
	if err != nil {
		return fmt.Errorf("safety check of %s: %w", dev, err)
	}
	for _, id := range []string{t.DiskGUID} {
		if what, ok := guardedIDs[strings.ToLower(id)]; ok {
			return &ProtectedDeviceError{dev, what}
		}
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
	for _, d := range append([]string{dev}, partitionsOf(e.root(), dev)...) {
		if sig, err := probeDevice(d); err == nil && sig == "gfs2" {
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
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for _, d := range disks {
		wg.Add(1)
		sem <- struct{}{}
		go func(dev string) {
			defer wg.Done()
			defer func() { <-sem }()
			r, err := e.EraseBlockDevice(ctx, dev, o)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[dev] = err
				return
			}
			results[dev] = r
		}(d.Name)
	}
	wg.Wait()
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

// ataErase runs IPA's ATA Secure Erase state machine through hdparm.
// supported is false when the drive does not offer the security feature
// set (the caller then overwrites); an error means the drive claims
// support but the erase could not be done.
func (e *Eraser) ataErase(ctx context.Context, dev string) (DeviceResult, bool, error) {
	lines, err := e.ataSecurity(ctx, dev)
	if err != nil {
		// No ATA identify (SCSI, virtio, USB bridges): not supported.
		e.log().Info("hdparm -I failed; ATA secure erase not available", "device", dev, "error", err)
		return DeviceResult{}, false, nil
	}
	if !hasLine(lines, "supported") {
		return DeviceResult{}, false, nil
	}
	if !hasLine(lines, "not frozen") {
		return DeviceResult{}, true, fmt.Errorf("block device %s is frozen and cannot be erased (security lines: %q)", dev, lines)
	}
	if lines, err = e.ataUnlock(ctx, dev, lines); err != nil {
		return DeviceResult{}, true, err
	}
	if !hasLine(lines, "not locked") {
		return DeviceResult{}, true, fmt.Errorf("block device %s already has a security password set", dev)
	}
	if hasLine(lines, "not enabled") {
		if _, err := e.Runner.Run(ctx, "hdparm", "--user-master", "u", "--security-set-pass", "NULL", dev); err != nil {
			return DeviceResult{}, true, fmt.Errorf("security password set failed for device %s: %w", dev, err)
		}
	}
	option, method := "--security-erase-enhanced", MethodATAEnhanced
	if hasLine(lines, "not supported: enhanced erase") {
		option, method = "--security-erase", MethodATA
	}
	if _, err := e.Runner.Run(ctx, "hdparm", "--user-master", "u", option, "NULL", dev); err != nil {
		// Unlock so an overwrite fallback can still write to the drive.
		_, _ = e.ataUnlock(ctx, dev, nil)
		return DeviceResult{}, true, fmt.Errorf("erase failed for device %s: %w", dev, err)
	}
	lines, err = e.ataSecurity(ctx, dev)
	if err != nil {
		return DeviceResult{}, true, fmt.Errorf("reading security state of %s after erase: %w", dev, err)
	}
	if !hasLine(lines, "not enabled") {
		return DeviceResult{}, true, fmt.Errorf("an unknown error occurred erasing block device %s: security still enabled after erase (%q)", dev, lines)
	}
	return DeviceResult{Method: method}, true, nil
}

func (e *Eraser) ataSecurity(ctx context.Context, dev string) ([]string, error) {
	out, err := e.Runner.Run(ctx, "hdparm", "-I", dev)
	if err != nil {
		return nil, err
	}
	return ataSecurityLines(string(out)), nil
}

// ataUnlock tries the passwords a failed earlier attempt may have left:
// "NULL", then "" (hdparm before 9.51 took NULL literally).
func (e *Eraser) ataUnlock(ctx context.Context, dev string, lines []string) ([]string, error) {
	var err error
	if lines == nil {
		if lines, err = e.ataSecurity(ctx, dev); err != nil {
			return nil, err
		}
	}
	for _, pw := range []string{"NULL", ""} {
		if hasLine(lines, "not locked") {
			break
		}
		if _, err := e.Runner.Run(ctx, "hdparm", "--user-master", "u", "--security-unlock", pw, dev); err != nil {
			e.log().Info("security unlock failed", "device", dev, "password", pw, "error", err)
		}
		if lines, err = e.ataSecurity(ctx, dev); err != nil {
			return nil, err
		}
	}
	return lines, nil
}

// nvmeErase formats an NVMe namespace with the strongest secure-erase
// setting its controller reports (IPA's _nvme_erase).
func (e *Eraser) nvmeErase(ctx context.Context, dev string) (DeviceResult, error) {
	id, err := e.nvmeIdentify(ctx, dev)
	if err != nil {
		return DeviceResult{}, err
	}
	return e.nvmeFormat(ctx, dev, id)
}

// nvmeIdentify runs and parses `nvme id-ctrl -o json`.
func (e *Eraser) nvmeIdentify(ctx context.Context, dev string) (nvmeIDCtrl, error) {
	out, err := e.Runner.Run(ctx, "nvme", "id-ctrl", dev, "-o", "json")
	if err != nil {
		return nvmeIDCtrl{}, fmt.Errorf("failed to fetch NVMe capabilities for device %s: %w", dev, err)
	}
	id, err := parseNVMeIDCtrl(out)
	if err != nil {
		return nvmeIDCtrl{}, fmt.Errorf("device %s: %w", dev, err)
	}
	return id, nil
}

// nvmeFormat runs the format IPA chooses from id. When the format would
// also hit other namespaces of the controller (fna bits 0/1), each of
// them must pass the guard too.
func (e *Eraser) nvmeFormat(ctx context.Context, dev string, id nvmeIDCtrl) (DeviceResult, error) {
	mode, err := nvmeFormatMode(id)
	if err != nil {
		return DeviceResult{}, fmt.Errorf("device %s: %w", dev, err)
	}
	if *id.FNA&(nvmeFNAAllNamespaces|nvmeFNASecureAllNS) != 0 {
		if err := e.guardSiblingNamespaces(dev, fmt.Sprintf("NVMe format of %s (fna=%#x)", dev, *id.FNA), false); err != nil {
			return DeviceResult{}, err
		}
	}
	if _, err := e.Runner.Run(ctx, "nvme", "format", dev, "-s", strconv.Itoa(mode), "-f"); err != nil {
		return DeviceResult{}, fmt.Errorf("failed to nvme format device %s: %w", dev, err)
	}
	if mode == 2 {
		return DeviceResult{Method: MethodNVMeCrypto}, nil
	}
	return DeviceResult{Method: MethodNVMeUserData}, nil
}

// guardSiblingNamespaces checks that every other namespace of dev's
// controller (or, for a sanitize, of its NVM subsystem) passes the guard
// before an operation that erases them all.
func (e *Eraser) guardSiblingNamespaces(dev, what string, subsystem bool) error {
	list, scope := e.nvmeSiblingNamespaces, "controller"
	if subsystem {
		list, scope = e.nvmeSubsystemNamespaces, "NVM subsystem"
	}
	siblings, err := list(dev)
	if err != nil {
		return fmt.Errorf("%s applies to every namespace of the %s, which cannot be listed: %w", what, scope, err)
	}
	for _, ns := range siblings {
		if err := e.Guard.Check(ns); err != nil {
			return fmt.Errorf("%s would also erase namespace %s: %w", what, ns, err)
		}
	}
	return nil
}

// nvmeNamespaceRE matches a namespace block device below an NVMe
// controller in sysfs: nvme<S>n<N>, or nvme<S>c<C>n<N> for a path of a
// namespace under native multipath (its device is the head nvme<S>n<N>).
var nvmeNamespaceRE = regexp.MustCompile(`^nvme(\d+)(?:c\d+)?n(\d+)$`)

// nvmeSiblingNamespaces lists the other namespaces of dev's controller as
// /dev paths of their block devices, or an error when they cannot be
// known (then a format that hits all namespaces must not run).
func (e *Eraser) nvmeSiblingNamespaces(dev string) ([]string, error) {
	dir, self, err := e.nvmeNamespace(dev)
	if err != nil {
		return nil, err
	}
	out, err := nvmeNamespacesIn(self, []string{filepath.Join(dir, "device")})
	if err != nil {
		return nil, fmt.Errorf("list namespaces of the controller of %s: %w", dev, err)
	}
	return out, nil
}

// nvmeNamespace returns dev's sysfs directory and the /dev path of its
// namespace (the head, for a multipath path device).
func (e *Eraser) nvmeNamespace(dev string) (sysDir, head string, err error) {
	dir, err := sysBlockDir(e.root(), dev)
	if err != nil {
		return "", "", err
	}
	m := nvmeNamespaceRE.FindStringSubmatch(filepath.Base(dir))
	if m == nil {
		return "", "", fmt.Errorf("%s is not an NVMe namespace device", dev)
	}
	return dir, "/dev/nvme" + m[1] + "n" + m[2], nil
}

// nvmeNamespacesIn lists the namespaces in sysfs directories (controllers,
// subsystems) as the /dev paths of their block devices, sorted, without
// self. A path device nvme<S>c<C>n<N> is the head nvme<S>n<N>.
func nvmeNamespacesIn(self string, dirs []string) ([]string, error) {
	seen := map[string]bool{self: true}
	var out []string
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			return nil, err
		}
		for _, en := range ents {
			m := nvmeNamespaceRE.FindStringSubmatch(en.Name())
			if m == nil {
				continue
			}
			if ns := "/dev/nvme" + m[1] + "n" + m[2]; !seen[ns] {
				seen[ns] = true
				out = append(out, ns)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// Overwrite writes passes random passes and, with zeroize, a final pass
// of zeroes over the whole device (IPA's shred --force [--zero]
// --iterations N). The random data comes from ChaCha8 seeded from the
// kernel's CSPRNG, fast enough not to slow the disk.
func (e *Eraser) Overwrite(ctx context.Context, dev string, passes int, zeroize bool) (DeviceResult, error) {
	d, err := openBlockDevice(e.Guard, dev)
	if err != nil {
		return DeviceResult{}, err
	}
	defer d.Close()
	total := passes
	if zeroize {
		total++
	}
	const chunk = 4 * mib
	buf, free, err := alignedBuffer(chunk)
	if err != nil {
		return DeviceResult{}, err
	}
	defer free()
	var written int64
	for pass := 1; pass <= total; pass++ {
		random := pass <= passes
		var rng *mrand.ChaCha8
		if random {
			var seed [32]byte
			if _, err := rand.Read(seed[:]); err != nil {
				return DeviceResult{}, fmt.Errorf("seed random pass: %w", err)
			}
			rng = mrand.NewChaCha8(seed)
		} else {
			clear(buf)
		}
		for off := int64(0); off < d.size; {
			if err := ctx.Err(); err != nil {
				return DeviceResult{}, err
			}
			n := int64(chunk)
			if d.size-off < n {
				n = d.size - off
			}
			if random {
				_, _ = rng.Read(buf[:n])
			}
			if _, err := d.f.WriteAt(buf[:n], off); err != nil {
				return DeviceResult{}, fmt.Errorf("overwrite pass %d/%d of %s at byte %d: %w", pass, total, dev, off, err)
			}
			off += n
			written += n
			if e.Progress != nil {
				e.Progress(dev, pass, total, off, d.size)
			}
		}
		if err := d.f.Sync(); err != nil {
			return DeviceResult{}, fmt.Errorf("sync %s after pass %d: %w", dev, pass, err)
		}
	}
	detail := fmt.Sprintf("%d random pass(es)", passes)
	if zeroize {
		detail += " + zero pass"
	}
	if d.isBlock() {
		if err := rereadPartitions(ctx, d.f); err != nil {
			return DeviceResult{}, err
		}
	}
	return DeviceResult{Method: MethodOverwrite, Detail: detail, Bytes: written}, nil
}

// erasableDevices is IPA's _list_erasable_devices: disks and their
// partitions, sorted by name descending so a partition is wiped before
// its disk's table disappears, minus virtual media, RAID members and
// read-only devices.
func (e *Eraser) erasableDevices(disks []inventory.Disk) ([]string, map[string]DeviceResult) {
	skipped := map[string]DeviceResult{}
	var devs []string
	for _, d := range disks {
		devs = append(devs, d.Name)
		devs = append(devs, partitionsOf(e.root(), d.Name)...)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(devs)))
	var out []string
	for _, dev := range devs {
		if why := e.skipReason(dev); why != "" {
			skipped[dev] = DeviceResult{Method: why}
			continue
		}
		if e.readOnly(dev) {
			skipped[dev] = DeviceResult{Method: MethodSkippedReadOnly}
			continue
		}
		out = append(out, dev)
	}
	return out, skipped
}

// EraseDevicesMetadata is the erase_devices_metadata step.
func (e *Eraser) EraseDevicesMetadata(ctx context.Context, disks []inventory.Disk, o EraseOptions) (map[string]DeviceResult, error) {
	return e.perDevice(ctx, "erase_devices_metadata", disks, o, func(dev string) (DeviceResult, error) {
		n, err := WipeMetadata(ctx, e.Guard, dev)
		return DeviceResult{Method: MethodMetadata, Bytes: n}, err
	})
}

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
	dir, _ := sysBlockDir(e.root(), dev)
	partition := dir != "" && isPartition(dir)
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
	if !errors.Is(err, errNotSupported) {
		e.log().Warn("discard/write-zeroes failed, falling back to the metadata wipe", "device", dev, "error", err)
	}
	n, werr := WipeMetadata(ctx, e.Guard, dev)
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
	dir, err := sysBlockDir(e.root(), dev)
	if err != nil {
		return DeviceResult{}, err
	}
	q := queueDir(dir)
	attr := func(name string) int64 {
		n, _ := readSysInt(filepath.Join(q, name))
		return n
	}
	discardMax, zeroesData, writeZeroesMax := attr("discard_max_bytes"), attr("discard_zeroes_data"), attr("write_zeroes_max_bytes")
	if writeZeroesMax == 0 && !(discardMax > 0 && zeroesData == 1) {
		return DeviceResult{}, fmt.Errorf("%s: %w (discard_max_bytes=%d discard_zeroes_data=%d write_zeroes_max_bytes=%d)",
			dev, errNotSupported, discardMax, zeroesData, writeZeroesMax)
	}
	d, err := openBlockDevice(e.Guard, dev)
	if err != nil {
		return DeviceResult{}, err
	}
	defer d.Close()
	if !d.isBlock() {
		return DeviceResult{}, fmt.Errorf("%s: %w: not a block device", dev, errNotSupported)
	}
	size := uint64(d.size)
	discarded, secure := false, false
	if discardMax > 0 {
		if err := ioctlRange(d.f, unix.BLKSECDISCARD, 0, size); err == nil {
			discarded, secure = true, true
		} else if err := ioctlRange(d.f, unix.BLKDISCARD, 0, size); err == nil {
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
		if err := ioctlRange(d.f, unix.BLKZEROOUT, 0, size); err != nil {
			return DeviceResult{}, fmt.Errorf("BLKZEROOUT %s: %w", dev, err)
		}
	} else if secure {
		method = "secure discard (device zeroes discarded data)"
	} else {
		method = "discard (device zeroes discarded data)"
	}
	if err := rereadPartitions(ctx, d.f); err != nil {
		return DeviceResult{}, err
	}
	return DeviceResult{Method: method}, nil
}
