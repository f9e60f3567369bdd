package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ironic-go/ironic-agent/agent/command"
	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/agent/ironic"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/bootloader"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// extensions is the command table: the extensions of IPA 2023.1 (standby,
// clean, deploy, flow, image, log, rescue, poll) and of IPA 9.7-10 (service,
// system) with the commands this agent implements. A command missing here
// answers 400 "Unknown command".
func (a *Agent) extensions() map[string]command.Extension {
	return map[string]command.Extension{
		"clean": {
			"get_clean_steps":    {Bind: a.bindGetSteps("clean")},
			"execute_clean_step": {Async: true, Bind: a.bindExecuteStep("clean")},
		},
		"deploy": {
			"get_deploy_steps":    {Bind: a.bindGetSteps("deploy")},
			"execute_deploy_step": {Async: true, Bind: a.bindExecuteStep("deploy")},
		},
		"service": {
			"get_service_steps":    {Bind: a.bindGetSteps("service")},
			"execute_service_step": {Async: true, Bind: a.bindExecuteStep("service")},
		},
		"system": {
			"lockdown": {Bind: a.bindLockdown},
		},
		"standby": {
			"get_partition_uuids": {Bind: a.bindGetPartitionUUIDs},
			"prepare_image":       {Async: true, Bind: a.bindPrepareImage},
			"power_off":           {Async: true, Bind: a.bindShutdown("power_off")},
			"run_image":           {Async: true, Bind: a.bindShutdown("run_image")},
			"sync":                {Bind: a.bindSync},
		},
		"image": {
			"install_bootloader": {Async: true, Bind: a.bindInstallBootloader},
		},
		"log": {
			"collect_system_logs": {Bind: a.bindCollectSystemLogs},
		},
		"poll": {
			"get_hardware_info": {Bind: a.bindGetHardwareInfo},
			"set_node_info":     {Bind: a.bindSetNodeInfo},
		},
		"flow": {
			"start_flow": {Async: true, Bind: a.bindStartFlow},
		},
		"rescue": {
			"finalize_rescue": {Bind: a.bindFinalizeRescue},
		},
	}
}

// nodePorts are the node and ports parameters every step command carries.
type nodePorts struct {
	Node  *map[string]any `json:"node"`
	Ports *[]any          `json:"ports"`
}

// decodeNodePorts reads and checks the node and ports parameters.
func decodeNodePorts(p command.Params) (nodePorts, error) {
	var np nodePorts
	if err := p.Decode(&np); err != nil {
		return np, err
	}
	return np, np.check()
}

func (np nodePorts) check() error {
	if np.Node == nil {
		return ipaerror.InvalidCommandParams("missing parameter node")
	}
	if np.Ports == nil {
		return ipaerror.InvalidCommandParams("missing parameter ports")
	}
	return nil
}

// bindGetSteps is clean.get_clean_steps / deploy.get_deploy_steps /
// service.get_service_steps.
func (a *Agent) bindGetSteps(kind string) func(command.Params) (command.Func, error) {
	return func(p command.Params) (command.Func, error) {
		np, err := decodeNodePorts(p)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (any, error) {
			a.cacheNode(*np.Node)
			var steps map[string][]hwmgr.Step
			var err error
			switch kind {
			case "clean":
				steps, err = a.managers.CleanSteps(ctx, *np.Node, *np.Ports)
			case "service":
				steps, err = a.managers.ServiceSteps(ctx, *np.Node, *np.Ports)
			default:
				steps, err = a.managers.DeploySteps(ctx, *np.Node, *np.Ports)
			}
			if err != nil {
				return nil, err
			}
			return map[string]any{kind + "_steps": steps, "hardware_manager_version": a.managers.Versions()}, nil
		}, nil
	}
}

// bindExecuteStep is clean.execute_clean_step / deploy.execute_deploy_step /
// service.execute_service_step.
func (a *Agent) bindExecuteStep(kind string) func(command.Params) (command.Func, error) {
	return func(p command.Params) (command.Func, error) {
		np, err := decodeNodePorts(p)
		if err != nil {
			return nil, err
		}
		// A missing or malformed step is accepted and then fails the
		// command, as IPA's execute_*_step raises inside its async command
		// (a FAILED CommandExecutionError Ironic reads back), after the
		// node is cached and the versions are checked.
		rawStep, ok := p["step"]
		var step struct {
			Step *string                    `json:"step"`
			Args map[string]json.RawMessage `json:"args"`
		}
		var malformed string
		switch {
		case !ok:
			malformed = fmt.Sprintf("execute_%s_step() missing 1 required positional argument: 'step'", kind)
		case json.Unmarshal(rawStep, &step) != nil || step.Step == nil:
			malformed = fmt.Sprintf("Malformed %s_step, no \"step\" key: %s", kind, rawStep)
		}
		versionKey := kind + "_version"
		// Extra parameters are step arguments too (IPA's **kwargs), then
		// step.args override them.
		args := map[string]json.RawMessage{}
		for k, v := range p {
			switch k {
			case "step", "node", "ports", versionKey:
			default:
				args[k] = v
			}
		}
		for k, v := range step.Args {
			args[k] = v
		}
		var name string
		if step.Step != nil {
			name = *step.Step
		}
		return func(ctx context.Context) (any, error) {
			a.cacheNode(*np.Node)
			if err := a.managers.CheckVersions(p[versionKey]); err != nil {
				return nil, err
			}
			if malformed != "" {
				a.log.Error("step refused", "kind", kind, "error", malformed)
				return nil, ipaerror.New("CommandExecutionError", 500, "Command execution failed", malformed)
			}
			a.log.Info(EventExecutingStep, "kind", kind, "step", name)
			// Cleared when the step ends, unless the agent's shutdown cut it
			// short (it failed with the context gone): that one did not
			// finish either.
			stepDone := a.markStepRunning(kind, name)
			res, err := a.managers.Dispatch(ctx, name, hwmgr.Request{Node: *np.Node, Ports: *np.Ports, Args: args})
			if err == nil || ctx.Err() == nil {
				stepDone()
			}
			if err != nil {
				var ce *ipaerror.Error
				if errors.As(err, &ce) {
					return nil, ce
				}
				a.log.Error("step failed", "kind", kind, "step", name, "error", err)
				return nil, stepError(kind, fmt.Sprintf("%s step %s failed: %v", kind, name, err))
			}
			a.log.Info(EventStepCompleted, "kind", kind, "step", name)
			return map[string]any{kind + "_result": res, kind + "_step": rawJSON(rawStep)}, nil
		}, nil
	}
}

// stepError is the error of a failed step of kind: IPA's CleaningError,
// DeploymentError or ServicingError.
func stepError(kind, details string) *ipaerror.Error {
	switch kind {
	case "clean":
		return ipaerror.CleaningError(details)
	case "service":
		return ipaerror.New("ServicingError", 500, "Service step failed", details)
	}
	return ipaerror.DeploymentError(details)
}

// noParams rejects every parameter, as IPA's commands without arguments
// do (Python refuses unexpected keyword arguments); Ironic sends {} to
// these.
func noParams(p command.Params) error {
	if len(p) == 0 {
		return nil
	}
	var names []string
	for k := range p {
		names = append(names, k)
	}
	return ipaerror.InvalidCommandParams("unexpected parameters: %s", strings.Join(names, ", "))
}

func (a *Agent) bindGetPartitionUUIDs(p command.Params) (command.Func, error) {
	if err := noParams(p); err != nil {
		return nil, err
	}
	return func(context.Context) (any, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.partitionUUIDs == nil {
			// Before any image write IPA answers {}.
			return map[string]any{}, nil
		}
		return a.partitionUUIDs, nil
	}, nil
}

// bindShutdown is standby.power_off and standby.run_image (reboot).
func (a *Agent) bindShutdown(which string) func(command.Params) (command.Func, error) {
	return func(p command.Params) (command.Func, error) {
		if err := noParams(p); err != nil {
			return nil, err
		}
		return func(ctx context.Context) (any, error) {
			// Let the RUNNING reply reach Ironic before the machine goes.
			if err := a.sleep(ctx, a.opts.Hooks.ShutdownDelay); err != nil {
				return nil, err
			}
			if err := a.syncClocksBeforeShutdown(ctx); err != nil {
				return nil, err
			}
			self, children := peakRSS()
			a.log.Warn("shutting the machine down on request", "command", which, "peak_rss_kib", self, "children_peak_rss_kib", children)
			var err error
			if which == "power_off" {
				err = a.machine.PowerOff()
			} else {
				err = a.machine.Reboot()
			}
			if err != nil {
				return nil, ipaerror.New("SystemRebootError", 500, "Error rebooting system", err.Error())
			}
			return nil, nil
		}, nil
	}
}

// bindSync is standby.sync: sync, drop caches, and flush every disk's
// buffers (IPA master's full_sync).
func (a *Agent) bindSync(p command.Params) (command.Func, error) {
	if err := noParams(p); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		if err := a.machine.Sync(); err != nil {
			return nil, err
		}
		disks, err := a.Disks(ctx)
		if err != nil {
			return nil, fmt.Errorf("sync: listing disks: %w", err)
		}
		var errs []error
		for _, d := range disks {
			if err := a.machine.FlushBlockDevice(d.Name); err != nil {
				errs = append(errs, err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		return nil, nil
	}, nil
}

func (a *Agent) bindCollectSystemLogs(p command.Params) (command.Func, error) {
	if err := noParams(p); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		logs, err := a.systemLogs(ctx)
		if err != nil {
			return nil, err
		}
		return map[string]any{"system_logs": logs}, nil
	}, nil
}

func (a *Agent) bindGetHardwareInfo(p command.Params) (command.Func, error) {
	if err := noParams(p); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		// A fresh inventory, as IPA's get_hardware_info dispatches anew.
		return a.refreshInventory(ctx)
	}, nil
}

// bindSetNodeInfo is poll.set_node_info: a standalone agent is handed
// what lookup would have returned, and applies it as a lookup reply, as
// IPA's set_node_info calls process_lookup_data (node, config, token and
// its warnings).
func (a *Agent) bindSetNodeInfo(p command.Params) (command.Func, error) {
	if !a.cfg.Standalone {
		return nil, ipaerror.InvalidCommand("set_node_info is only allowed in standalone mode")
	}
	raw, ok := p["node_info"]
	if !ok {
		return nil, ipaerror.InvalidCommandParams("missing parameter node_info")
	}
	var info struct {
		Node   map[string]any  `json:"node"`
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, ipaerror.InvalidCommandParams("node_info: %v", err)
	}
	uuid, _ := info.Node["uuid"].(string)
	if uuid == "" {
		return nil, ipaerror.InvalidCommandParams("node_info: no node.uuid")
	}
	res := &ironic.LookupResult{Node: info.Node, NodeUUID: uuid}
	if len(info.Config) > 0 && string(info.Config) != "null" {
		cfg, err := ironic.ParseLookupConfig(info.Config)
		if err != nil {
			return nil, ipaerror.InvalidCommandParams("node_info.config: %v", err)
		}
		res.Config = cfg
	}
	return func(context.Context) (any, error) {
		a.processLookup(res)
		return nil, nil
	}, nil
}

// bindStartFlow is flow.start_flow: run sub-commands in order, unrecorded,
// failing on the first failure.
func (a *Agent) bindStartFlow(p command.Params) (command.Func, error) {
	raw, ok := p["flow"]
	if !ok {
		return nil, ipaerror.InvalidCommandParams("missing parameter flow")
	}
	var flow []map[string]command.Params
	if err := json.Unmarshal(raw, &flow); err != nil {
		return nil, ipaerror.InvalidCommandParams("flow: want a list of {\"<extension>.<command>\": {params}}: %v", err)
	}
	exts := a.extensions()
	for _, task := range flow {
		for name := range task {
			ext, cmd, _ := strings.Cut(name, ".")
			if _, ok := exts[ext][cmd]; !ok {
				return nil, ipaerror.InvalidCommandParams("Extension %s doesn't provide %s method", ext, cmd)
			}
		}
	}
	return func(ctx context.Context) (any, error) {
		for _, task := range flow {
			for name, params := range task {
				if _, err := a.exec.RunNested(ctx, name, params); err != nil {
					return nil, ipaerror.ExecutionError(fmt.Errorf("%s was failed: %w", name, err))
				}
			}
		}
		return nil, nil
	}, nil
}

// bindInstallBootloader is image.install_bootloader, following IPA 2023.1:
// with a UEFI-booted ramdisk and efivarfs mounted, NVRAM entries are made
// for the boot loaders on the install disk's EFI system partition; a
// whole-disk image (root_uuid null or 0x00000000) otherwise needs nothing;
// a partition image gets the image's own GRUB (grub.go) when
// enable_bios_bootloader_install allows it.
func (a *Agent) bindInstallBootloader(p command.Params) (command.Func, error) {
	var args struct {
		RootUUID          *string `json:"root_uuid"`
		EFISystemPartUUID *string `json:"efi_system_part_uuid"`
		PrepBootPartUUID  *string `json:"prep_boot_part_uuid"`
		TargetBootMode    *string `json:"target_boot_mode"`
		IgnoreFailure     *bool   `json:"ignore_bootloader_failure"`
	}
	if err := p.Decode(&args); err != nil {
		return nil, err
	}
	if _, ok := p["root_uuid"]; !ok {
		return nil, ipaerror.InvalidCommandParams("missing parameter root_uuid")
	}
	ignore := a.cfg.IgnoreBootloaderFailure
	if args.IgnoreFailure != nil {
		ignore = *args.IgnoreFailure
	}
	return func(ctx context.Context) (any, error) {
		inv, err := a.Inventory(ctx)
		if err != nil {
			return nil, err
		}
		mode := inv.Boot.CurrentBootMode
		if args.TargetBootMode != nil && *args.TargetBootMode != mode {
			a.log.Warn("boot mode mismatch: installing the boot loader may fail or work incorrectly", "target", *args.TargetBootMode, "current", mode)
		}
		if mode == "uefi" {
			if a.uefiVarsAvailable() {
				done, err := a.uefiBootSetup(ctx, args.EFISystemPartUUID)
				if err != nil && !ignore {
					return nil, err
				}
				if err != nil {
					a.log.Error("ignoring boot loader failure", "error", err)
				}
				if done {
					return nil, nil
				}
			}
		}
		if args.RootUUID == nil || *args.RootUUID == "0x00000000" {
			a.log.Info("no root UUID: whole-disk image, no boot loader to install")
			return nil, nil
		}
		if !a.biosBootloaderInstallEnabled() {
			e := ipaerror.New("InvalidImage", 500, "The provided image is not valid for use",
				"Install of legacy BIOS bootloaders disabled by CONF.enable_bios_bootloader_install as part of CVE-2026-43003 mitigation.")
			a.log.Error(e.Details)
			if !ignore {
				return nil, e
			}
			return nil, nil
		}
		if err := a.installGrub(ctx, inv, args.RootUUID, args.EFISystemPartUUID, args.PrepBootPartUUID, args.TargetBootMode); err != nil {
			a.log.Error("error setting up the boot loader", "error", err)
			if !ignore {
				return nil, err
			}
		}
		return nil, nil
	}, nil
}

// biosBootloaderInstallEnabled is enable_bios_bootloader_install: the
// agent's option, switched on by a true value in the lookup config
// (Debian's Ironic 21.4.4 sends true).
func (a *Agent) biosBootloaderInstallEnabled() bool {
	if v := a.LookupConfig().EnableBIOSBootloaderInstall; v != nil && *v {
		return true
	}
	return a.cfg.EnableBIOSBootloaderInstall
}

// installGrub runs _install_grub2 on the install disk (chosen as the image
// writer chose it): bootloader.Install does the disk work.
func (a *Agent) installGrub(ctx context.Context, inv *inventory.Inventory, rootUUID, efiUUID, prepUUID, targetBootMode *string) error {
	disks, err := a.installDisks(ctx)
	if err != nil {
		return err
	}
	guard := blockdev.NewGuard(a.cfg.AllowedDevices)
	dev, err := a.installDevice(guard, disks)
	if err != nil {
		return bootloader.DeviceNotFound(err)
	}
	return bootloader.Install(ctx, bootloader.Request{
		Disk: dev.Name, Guard: guard, RootUUID: deref(rootUUID), EFIUUID: deref(efiUUID), PRePUUID: deref(prepUUID),
		TargetBootMode: deref(targetBootMode), CPUArch: inv.CPU.Architecture, RamdiskUEFI: inv.Boot.CurrentBootMode == "uefi",
		RAID: a.generic.raidSystem, UEFIVars: a.uefiVars, Log: a.log,
	})
}

// uefiBootSetup picks the install disk as the image writer did and makes
// its NVRAM entries.
func (a *Agent) uefiBootSetup(ctx context.Context, efiPartUUID *string) (bool, error) {
	disks, err := a.installDisks(ctx)
	if err != nil {
		return false, err
	}
	dev, err := a.installDevice(blockdev.NewGuard(a.cfg.AllowedDevices), disks)
	if err != nil {
		return false, bootloader.DeviceNotFound(err)
	}
	return a.manageUEFI(ctx, dev.Name, deref(efiPartUUID))
}

// deref is a JSON string parameter's value, "" when null or absent.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
