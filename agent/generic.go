package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/deploy"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/inventory"
)

// GenericManagerVersion is hardware_manager_version of the generic manager.
// We report the 2023.1 line's "1.1": this agent pairs with Ironic 21.4
// (2023.1), whose IPA reported "1.1". Ironic only compares it with what the
// same agent said at get_*_steps time, so it must never change within one
// build; bump it when the step table changes incompatibly.
const GenericManagerVersion = "1.1"

// GenericManager is IPA's GenericHardwareManager: the steps every machine
// gets. Its step table lists IPA's clean and deploy steps (names,
// interfaces, priorities, flags); a step whose run function is nil is not
// implemented in this build and is neither listed to Ironic nor runnable.
//
// The disk steps call into the deploy packages; wiring one is a one-line edit of
// its table entry below.
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
}

// stepFunc runs one step.
type stepFunc func(ctx context.Context, req hwmgr.Request) (any, error)

type genericStep struct {
	step      string
	iface     string
	priority  int
	abortable bool
	argsinfo  map[string]hwmgr.ArgInfo
	run       stepFunc
}

// cleanSteps is IPA 2023.1's generic clean step table (hardware.py
// GenericHardwareManager.get_clean_steps); every entry is
// reboot_requested=false.
func (g *GenericManager) cleanSteps() []genericStep {
	return []genericStep{
		{step: "erase_devices", iface: "deploy", priority: 10, abortable: true, run: g.eraseStep((*erase.Eraser).EraseDevices)},
		{step: "erase_devices_metadata", iface: "deploy", priority: 99, abortable: true, run: g.eraseStep((*erase.Eraser).EraseDevicesMetadata)},
		{step: "erase_devices_express", iface: "deploy", priority: 0, abortable: true, run: g.eraseStep((*erase.Eraser).EraseDevicesExpress)},
		{step: "erase_pstore", iface: "deploy", priority: 0, abortable: true, run: g.erasePstore},
		// Software RAID: agent/raid.go. Burn-in (stress-ng, fio) is not
		// implemented by this agent.
		{step: "delete_configuration", iface: "raid", priority: 0, abortable: true, run: g.raidDeleteStep},
		{step: "create_configuration", iface: "raid", priority: 0, abortable: true, run: g.raidCreateStep},
		{step: "burnin_cpu", iface: "deploy", priority: 0, abortable: true, run: nil},
		{step: "burnin_disk", iface: "deploy", priority: 0, abortable: true, run: nil},
		{step: "burnin_memory", iface: "deploy", priority: 0, abortable: true, run: nil},
		{step: "burnin_network", iface: "deploy", priority: 0, abortable: true, run: nil},
	}
}

// deploySteps is IPA 2023.1's generic deploy step table (no abortable key).
func (g *GenericManager) deploySteps() []genericStep {
	return []genericStep{
		{step: "erase_devices_metadata", iface: "deploy", priority: 0, run: g.eraseStep((*erase.Eraser).EraseDevicesMetadata)},
		{step: "apply_configuration", iface: "raid", priority: 0, run: g.raidApplyStep, argsinfo: map[string]hwmgr.ArgInfo{
			"raid_config":     {Description: "The RAID configuration to apply.", Required: true},
			"delete_existing": {Description: "Setting this to 'True' indicates to delete existing RAID configuration prior to creating the new configuration. Default value is 'True'.", Required: false},
		}},
		{step: "write_image", iface: "deploy", priority: 0, run: g.writeImageStep},
		{step: "inject_files", iface: "deploy", priority: g.InjectFilesPriority, run: nil, argsinfo: map[string]hwmgr.ArgInfo{
			"files":     {Description: "Files to inject, a list of file structures with keys: 'path' (path to the file), 'partition' (partition specifier), 'content' (base64 encoded string), 'mode' (new file mode) and 'dirmode' (mode for the leaf directory, if created). Merged with the values from node.properties[inject_files].", Required: false},
			"verify_ca": {Description: "Whether to verify TLS certificates. Global agent options are used by default.", Required: false},
		}},
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
		e := &erase.Eraser{Guard: blockdev.NewGuard(g.AllowedDevices), Runner: blockdev.ExecRunner{}, Logger: g.Log}
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

func list(table []genericStep, clean bool) []hwmgr.Step {
	out := []hwmgr.Step{}
	for _, s := range table {
		if s.run == nil {
			continue
		}
		st := hwmgr.Step{Step: s.step, Priority: s.priority, Interface: s.iface, Argsinfo: s.argsinfo}
		if clean {
			ab := s.abortable
			st.Abortable = &ab
		}
		out = append(out, st)
	}
	return out
}

// CleanSteps implements hwmgr.Manager.
func (g *GenericManager) CleanSteps(context.Context, map[string]any, []any) ([]hwmgr.Step, error) {
	return list(g.cleanSteps(), true), nil
}

// DeploySteps implements hwmgr.Manager.
func (g *GenericManager) DeploySteps(context.Context, map[string]any, []any) ([]hwmgr.Step, error) {
	return list(g.deploySteps(), false), nil
}

// ExecuteStep implements hwmgr.Manager. A step name is looked up in the
// clean table, then the deploy table (IPA dispatches by method name, so a
// step shared by both is one method).
func (g *GenericManager) ExecuteStep(ctx context.Context, step string, req hwmgr.Request) (any, error) {
	for _, table := range [][]genericStep{g.cleanSteps(), g.deploySteps()} {
		for _, s := range table {
			if s.step == step && s.run != nil {
				return s.run(ctx, req)
			}
		}
	}
	return nil, fmt.Errorf("generic manager: step %s: %w", step, hwmgr.ErrNoSuchMethod)
}
