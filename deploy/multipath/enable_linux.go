package multipath

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ironic-go/ironic-agent/internal/devmapper"
	"github.com/ironic-go/ironic-agent/inventory"
)

// Enable makes the multipath maps of paths (collector.MultipathPaths of
// the machine) that do not exist yet: IPA's _enable_multipath. It opens
// /dev/mapper/control only when there is a map to make, so a machine
// without multipath does not need device-mapper. It returns the device
// nodes made.
func Enable(ctx context.Context, paths []inventory.MultipathPath, log *slog.Logger) ([]string, error) {
	if !planned(paths) {
		return nil, nil
	}
	ctl, err := devmapper.Open()
	if err != nil {
		return nil, fmt.Errorf("multipath: paths to one LUN found, but device-mapper cannot be used: %w", err)
	}
	defer ctl.Close()
	return Assemble(ctx, ctl, paths, log), nil
}

// planned says whether Plan has a map to make or a LUN to explain.
func planned(paths []inventory.MultipathPath) bool {
	maps, skipped := Plan(paths)
	return len(maps) > 0 || len(skipped) > 0
}

// Wanted says whether paths call for device-mapper: a map to make, or a
// map that exists to keep (Checker).
func Wanted(paths []inventory.MultipathPath) bool {
	return planned(paths) || len(mapNames(paths)) > 0
}
