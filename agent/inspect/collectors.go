package inspect

import (
	"context"
	"errors"
	"fmt"

	"github.com/ironic-go/ironic-agent/collector"
)

// collectorFunc runs one of IPA's inspection collectors: it adds its keys
// to data and returns the failures to report in "error" (IPA's wording
// where IPA has one).
type collectorFunc func(ctx context.Context, o Options, data map[string]any) []string

// collectors are the names ipa-inspection-collectors may list.
func collectors() map[string]collectorFunc {
	return map[string]collectorFunc{
		"default":        collectDefault,
		"logs":           collectLogs,
		"pci-devices":    collectPCIDevices,
		"numa-topology":  collectNUMATopology,
		"dmi-decode":     collectDMI,
		"usb-devices":    collectUSBDevices,
		"extra-hardware": collectExtraHardware,
		"lldp":           collectLLDP,
	}
}

func collectDefault(_ context.Context, o Options, data map[string]any) []string {
	data["inventory"] = o.Inventory
	disks := o.RootDiskCandidates
	if disks == nil && o.Inventory != nil {
		disks = o.Inventory.Disks
	}
	if d := RootDisk(disks); d != nil {
		data["root_disk"] = d
	}
	if o.BootIF != "" {
		data["boot_interface"] = o.BootIF
	} else {
		data["boot_interface"] = nil
	}
	data["configuration"] = map[string]any{"collectors": o.Collectors, "managers": o.managers()}
	return nil
}

func collectLogs(ctx context.Context, o Options, data map[string]any) []string {
	if o.Logs == nil {
		return []string{"collector logs: no log source"}
	}
	logs, err := o.Logs(ctx)
	if err != nil {
		return []string{fmt.Sprintf("collector logs: %v", err)}
	}
	data["logs"] = logs
	return nil
}

func collectPCIDevices(ctx context.Context, o Options, data map[string]any) []string {
	devs, err := collector.PCIDevices(ctx, o.collectorOptions())
	if err != nil {
		return []string{fmt.Sprintf("Failed to get list of PCI devices: %v", err)}
	}
	data["pci_devices"] = devs
	return nil
}

func collectNUMATopology(ctx context.Context, o Options, data map[string]any) []string {
	topo, err := collector.ReadNUMATopology(ctx, o.collectorOptions())
	if err != nil {
		// IPA only warns: a machine without NUMA sysfs is no error.
		o.log().Warn("Failed to get some NUMA information", "error", err)
		return nil
	}
	if topo != nil {
		data["numa_topology"] = topo
	}
	return nil
}

func collectDMI(ctx context.Context, o Options, data map[string]any) []string {
	dmi, err := collector.DMIDecode(ctx, o.collectorOptions())
	switch {
	case errors.Is(err, collector.ErrDMIUnparsable):
		// IPA sets "dmi" to {} before its parser raises.
		data["dmi"] = map[string]any{}
		return []string{fmt.Sprintf("collector dmi-decode failed: %v", err)}
	case err != nil:
		return []string{fmt.Sprintf("failed to run dmidecode: %v", err)}
	}
	data["dmi"] = dmi
	return nil
}

func collectUSBDevices(ctx context.Context, o Options, data map[string]any) []string {
	devs, err := collector.USBDevices(ctx, o.collectorOptions())
	if err != nil {
		return []string{fmt.Sprintf("collector usb-devices failed: %v", err)}
	}
	data["usb_devices"] = devs
	return nil
}

func collectExtraHardware(ctx context.Context, o Options, data map[string]any) []string {
	items, err := collector.ExtraHardware(ctx, o.collectorOptions(), o.Inventory)
	if err != nil {
		return []string{fmt.Sprintf("collector extra-hardware failed: %v", err)}
	}
	data["data"] = items
	if o.Benchmarks != "" {
		// Refused loudly rather than skipped: Ironic fails the inspection
		// on the error, and nothing is silently missing.
		return []string{fmt.Sprintf("collector extra-hardware: benchmarks (ipa-inspection-benchmarks=%s) are not run by this agent", o.Benchmarks)}
	}
	return nil
}

func collectLLDP(ctx context.Context, o Options, data map[string]any) []string {
	if o.LLDPRaw == nil {
		return []string{"collector lldp: LLDP capture is not available in this build"}
	}
	raw, err := o.LLDPRaw(ctx)
	if err != nil {
		return []string{fmt.Sprintf("collector lldp: %v", err)}
	}
	data["lldp_raw"] = raw
	return nil
}
