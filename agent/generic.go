package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/deploy"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/burnin"
	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/inventory"
)

// GenericManagerVersion is hardware_manager_version of the generic manager:
// IPA's "1.2" (9.7 onwards, and still IPA 13's), the version that added
// get_service_steps, which this agent now answers. Ironic never compares
// it with a constant: it stores what get_*_steps returned and sends it back
// as clean_version, deploy_version or service_version, and the agent
// refuses a step on a mismatch. So it must never change within one build,
// and it changes when the step table does (1.1 to 1.2 with servicing), so
// an operation begun by an older ramdisk restarts rather than run steps it
// never listed.
const GenericManagerVersion = "1.2"

// GenericManager is IPA's GenericHardwareManager: the steps every machine
// gets. Its step tables list IPA 13's clean, deploy and service steps
// (names, interfaces, priorities, flags, argsinfo); a step whose run
// function is nil is not implemented in this build and is neither listed to
// Ironic nor runnable.
//
// The steps call into the deploy packages; wiring one is a one-line edit of
// its table entries below.
type GenericManager struct {
	// Disks lists the disks the steps may touch: the inventory's, or
	// exactly the allowed devices when the agent is confined.
	Disks func(ctx context.Context) ([]inventory.Disk, error)
	// InjectFilesPriority is ipa-inject-files-priority.
	InjectFilesPriority int
	// agent gives step implementations what they need beyond the request:
	// Config() (allowed_devices, image download options), HTTPClient (TLS
	// options), Node() and LookupConfig() (hints, permitted image formats),
	// SetPartitionUUIDs, and Executor().RunNested for write_image's nested
	// prepare_image. nil in unit tests of the table.
	agent *Agent
	// AllowedDevices confines every write and erase (blockdev.Guard); empty
	// allows any disk that is not in use.
	AllowedDevices []string
	// Log receives the erase steps' warnings.
	Log *slog.Logger
	// SkipSpecialFilesystemGuard is the agent's guard_special_filesystems
	// (ipa-guard-special-filesystems) set to false: the erase steps then
	// wipe GPFS, VMFS and GFS2 devices whatever the node says. Negative so
	// that a zero GenericManager keeps the guard.
	SkipSpecialFilesystemGuard bool
	// networkBurnin, when its Port is set, replaces burnin_network's
	// port 9000 on every address and 30 s reader retry (tests).
	networkBurnin burnin.NetworkOptions
	// raidRoots are the arrays created with is_root_volume (raid.go).
	raidRoots raidRootVolumes
}

// logger is Log, or a discarding logger when none is set (unit tests of
// the steps).
func (g *GenericManager) logger() *slog.Logger { return logging.OrDiscard(g.Log) }

// stepFunc runs one step.
type stepFunc func(ctx context.Context, req hwmgr.Request) (any, error)

type genericStep struct {
	step     string
	iface    string
	priority int
	// abortable is nil where IPA's list has no abortable key (its deploy
	// list, and some entries of its service list).
	abortable *bool
	argsinfo  map[string]hwmgr.ArgInfo
	run       stepFunc
}

// abortable is the abortable=true of IPA's clean and service entries.
func abortable() *bool { t := true; return &t }

// raidApplyArgsinfo is IPA's RAID_APPLY_CONFIGURATION_ARGSINFO.
func raidApplyArgsinfo() map[string]hwmgr.ArgInfo {
	return map[string]hwmgr.ArgInfo{
		"raid_config":     {Description: "The RAID configuration to apply.", Required: true},
		"delete_existing": {Description: "Setting this to 'True' indicates to delete existing RAID configuration prior to creating the new configuration. Default value is 'True'.", Required: false},
	}
}

// injectFilesArgsinfo is IPA's inject_files.ARGSINFO.
func injectFilesArgsinfo() map[string]hwmgr.ArgInfo {
	return map[string]hwmgr.ArgInfo{
		"files":     {Description: "Files to inject, a list of file structures with keys: 'path' (path to the file), 'partition' (partition specifier), 'content' (base64 encoded string), 'mode' (new file mode) and 'dirmode' (mode for the leaf directory, if created). Merged with the values from node.properties[inject_files].", Required: false},
		"verify_ca": {Description: "Whether to verify TLS certificates. Global agent options are used by default.", Required: false},
	}
}

// cleanUEFINVRAMArgsinfo is IPA's DEPLOY_CLEAN_UEFI_NVRAM_ARGSINFO.
func cleanUEFINVRAMArgsinfo() map[string]hwmgr.ArgInfo {
	return map[string]hwmgr.ArgInfo{
		"match_patterns": {Description: `Json blob contains a list of regex patterns where any UEFI NVRAM entry matching that pattern will be deleted. Default value is '["^HD\(", "shim.*\.efi", "grub.*\.efi"]'`, Required: false},
	}
}

// cleanSteps is IPA 13's generic clean step table (hardware.py
// GenericHardwareManager.get_clean_steps): every entry abortable,
// reboot_requested=false. burnin_gpu (gpu_burn, a CUDA program) is not
// implemented by this agent; software RAID is agent/raid.go.
func (g *GenericManager) cleanSteps() []genericStep {
	return []genericStep{
		{step: "erase_devices", iface: "deploy", priority: 10, abortable: abortable(), run: g.eraseStep((*erase.Eraser).EraseDevices)},
		{step: "erase_devices_metadata", iface: "deploy", priority: 99, abortable: abortable(), run: g.eraseStep((*erase.Eraser).EraseDevicesMetadata)},
		{step: "erase_devices_express", iface: "deploy", priority: 0, abortable: abortable(), run: g.eraseStep((*erase.Eraser).EraseDevicesExpress)},
		{step: "erase_pstore", iface: "deploy", priority: 0, abortable: abortable(), run: g.erasePstore},
		{step: "clean_uefi_nvram", iface: "deploy", priority: 0, abortable: abortable(), argsinfo: cleanUEFINVRAMArgsinfo(), run: g.cleanUEFINVRAMStep},
		{step: "delete_configuration", iface: "raid", priority: 0, abortable: abortable(), run: g.raidDeleteStep},
		{step: "create_configuration", iface: "raid", priority: 0, abortable: abortable(), run: g.raidCreateStep},
		{step: "burnin_cpu", iface: "deploy", priority: 0, abortable: abortable(), run: g.burninCPUStep},
		{step: "burnin_gpu", iface: "deploy", priority: 0, abortable: abortable(), run: nil},
		{step: "burnin_disk", iface: "deploy", priority: 0, abortable: abortable(), run: g.burninDiskStep},
		{step: "burnin_memory", iface: "deploy", priority: 0, abortable: abortable(), run: g.burninMemoryStep},
		{step: "burnin_network", iface: "deploy", priority: 0, abortable: abortable(), run: g.burninNetworkStep},
	}
}

// deploySteps is IPA 13's generic deploy step table (no abortable key).
// execute_bootc_install (podman and bootc in the ramdisk) is not
// implemented by this agent.
func (g *GenericManager) deploySteps() []genericStep {
	return []genericStep{
		{step: "erase_devices_metadata", iface: "deploy", priority: 0, run: g.eraseStep((*erase.Eraser).EraseDevicesMetadata)},
		{step: "apply_configuration", iface: "raid", priority: 0, argsinfo: raidApplyArgsinfo(), run: g.raidApplyStep},
		{step: "clean_uefi_nvram", iface: "deploy", priority: 0, argsinfo: cleanUEFINVRAMArgsinfo(), run: g.cleanUEFINVRAMStep},
		{step: "write_image", iface: "deploy", priority: 0, run: g.writeImageStep},
		{step: "inject_files", iface: "deploy", priority: g.InjectFilesPriority, argsinfo: injectFilesArgsinfo(), run: g.injectFilesStep},
		{step: "execute_bootc_install", iface: "deploy", priority: 0, run: nil},
	}
}

// serviceSteps is IPA 13's generic service step table
// (get_service_steps). IPA leaves burnin_disk out on purpose: servicing
// runs on a provisioned machine whose disks hold the instance's data.
func (g *GenericManager) serviceSteps() []genericStep {
	return []genericStep{
		{step: "delete_configuration", iface: "raid", priority: 0, abortable: abortable(), run: g.raidDeleteStep},
		{step: "apply_configuration", iface: "raid", priority: 0, argsinfo: raidApplyArgsinfo(), run: g.raidApplyStep},
		{step: "create_configuration", iface: "raid", priority: 0, abortable: abortable(), run: g.raidCreateStep},
		{step: "burnin_cpu", iface: "deploy", priority: 0, abortable: abortable(), run: g.burninCPUStep},
		{step: "burnin_gpu", iface: "deploy", priority: 0, abortable: abortable(), run: nil},
		{step: "burnin_memory", iface: "deploy", priority: 0, abortable: abortable(), run: g.burninMemoryStep},
		{step: "burnin_network", iface: "deploy", priority: 0, abortable: abortable(), run: g.burninNetworkStep},
		{step: "write_image", iface: "deploy", priority: 0, run: g.writeImageStep},
		{step: "inject_files", iface: "deploy", priority: g.InjectFilesPriority, argsinfo: injectFilesArgsinfo(), run: g.injectFilesStep},
		{step: "execute_bootc_install", iface: "deploy", priority: 0, run: nil},
	}
}

// eraseStep runs one of deploy/erase's steps over the agent's disks (the
// allowed devices when confined) with the node's driver_internal_info
// options; the result maps each device to the method used.
func (g *GenericManager) eraseStep(step func(*erase.Eraser, context.Context, []inventory.Disk, erase.EraseOptions) (map[string]erase.DeviceResult, error)) stepFunc {
	return func(ctx context.Context, req hwmgr.Request) (any, error) {
		opts, err := erase.EraseOptionsFromNode(req.Node)
		if err != nil {
			return nil, err
		}
		opts.GuardSpecialFilesystems = !g.SkipSpecialFilesystemGuard
		disks, err := g.eraseDisks(ctx, req.Node)
		if err != nil {
			return nil, err
		}
		if g.agent != nil {
			// The disks may no longer hold the image last written.
			g.agent.images.forget()
		}
		progress := newEraseProgress(g.Log, time.Now())
		ticker := time.NewTicker(eraseProgressInterval)
		defer ticker.Stop()
		progressCtx, stopProgress := context.WithCancel(ctx)
		progressDone := make(chan struct{})
		go func() { defer close(progressDone); progress.run(progressCtx, ticker.C) }()
		defer func() { stopProgress(); <-progressDone }()
		e := &erase.Eraser{Guard: blockdev.NewGuard(g.AllowedDevices), Runner: blockdev.ExecRunner{}, Logger: g.Log,
			Progress: progress.update}
		return step(e, ctx, disks, opts)
	}
}

// finishWholeDiskImage ends prepare_image for a whole-disk image once the
// image is verified on dev (write_image calls it): the config drive when
// one was given, then the partition UUIDs standby.get_partition_uuids
// reports ({"root uuid": "0x<MBR signature>"}), recorded on the agent.
func (g *GenericManager) finishWholeDiskImage(ctx context.Context, dev, configdrive string) (map[string]any, error) {
	var client *http.Client
	if g.agent != nil {
		c, err := g.agent.HTTPClient(0)
		if err != nil {
			return nil, err
		}
		client = c
	}
	uuids, _, err := deploy.FinishWholeDisk(ctx, blockdev.NewGuard(g.AllowedDevices), client, dev, configdrive)
	if err != nil {
		return nil, err
	}
	if g.agent != nil {
		g.agent.SetPartitionUUIDs(uuids)
	}
	return uuids, nil
}

// erasePstore is erase_pstore: the result lists the records removed. An
// agent reading a fixture tree (the end-to-end tests') is not on the
// machine it describes, so the machine's crash records are not its to
// delete: it removes none.
func (g *GenericManager) erasePstore(ctx context.Context, _ hwmgr.Request) (any, error) {
	if g.agent != nil && !g.agent.liveMachine() {
		g.Log.Warn("erase_pstore: the inventory is a fixture tree, not this machine: no crash record removed", "inventory_root", g.agent.cfg.InventoryRoot)
		return map[string]any{"removed": []string{}}, nil
	}
	removed, err := erase.ErasePstore(ctx, "/")
	if err != nil {
		return nil, err
	}
	return map[string]any{"removed": append([]string{}, removed...)}, nil
}

// Name implements hwmgr.Manager.
func (g *GenericManager) Name() string { return "generic_hardware_manager" }

// ClassName implements hwmgr.Manager.
func (g *GenericManager) ClassName() string { return "GenericHardwareManager" }

// Version implements hwmgr.Manager.
func (g *GenericManager) Version() string { return GenericManagerVersion }

// EvaluateHardwareSupport implements hwmgr.Manager: generic supports any
// machine.
func (g *GenericManager) EvaluateHardwareSupport(context.Context) hwmgr.Support {
	return hwmgr.SupportGeneric
}

func list(table []genericStep) []hwmgr.Step {
	out := []hwmgr.Step{}
	for _, s := range table {
		if s.run == nil {
			continue
		}
		out = append(out, hwmgr.Step{Step: s.step, Priority: s.priority, Interface: s.iface, Argsinfo: s.argsinfo, Abortable: s.abortable})
	}
	return out
}

// CleanSteps implements hwmgr.Manager.
func (g *GenericManager) CleanSteps(context.Context, map[string]any, []any) ([]hwmgr.Step, error) {
	return list(g.cleanSteps()), nil
}

// DeploySteps implements hwmgr.Manager.
func (g *GenericManager) DeploySteps(context.Context, map[string]any, []any) ([]hwmgr.Step, error) {
	return list(g.deploySteps()), nil
}

// ServiceSteps implements hwmgr.ServiceLister.
func (g *GenericManager) ServiceSteps(context.Context, map[string]any, []any) ([]hwmgr.Step, error) {
	return list(g.serviceSteps()), nil
}

// ExecuteStep implements hwmgr.Manager. A step name is looked up in the
// clean, deploy and service tables (IPA dispatches by method name, so a
// step shared by several is one method).
func (g *GenericManager) ExecuteStep(ctx context.Context, step string, req hwmgr.Request) (any, error) {
	for _, table := range [][]genericStep{g.cleanSteps(), g.deploySteps(), g.serviceSteps()} {
		for _, s := range table {
			if s.step == step && s.run != nil {
				return s.run(ctx, req)
			}
		}
	}
	return nil, fmt.Errorf("generic manager: step %s: %w", step, hwmgr.ErrNoSuchMethod)
}
