package agent

import (
	"context"

	"github.com/ironic-go/ironic-agent/collector"

	"github.com/ironic-go/ironic-agent/deploy/multipath"
)

// enableMultipath makes the machine's multipath maps, as IPA's initialize
// does through multipathd and `multipath -ll`: at start, before the wait
// for a root disk, and again whenever the disks or the inventory are
// listed, so two paths that appear late (a slow HBA) still make one map,
// as multipathd would gather them. Only when asked (Options.EnableMultipath), on the live
// machine, for an agent that is not confined to allowed devices.
func (a *Agent) enableMultipath(ctx context.Context) {
	if !a.opts.EnableMultipath || !a.liveMachine() || len(a.cfg.AllowedDevices) > 0 {
		return
	}
	// Two listings at once must not both make the same map.
	a.multipathMu.Lock()
	defer a.multipathMu.Unlock()
	paths, err := collector.MultipathPaths(ctx, collector.Options{Root: "/", Logger: a.log})
	if err == nil {
		_, err = multipath.Enable(ctx, paths, a.log)
	}
	if err != nil {
		a.log.Warn("multipath not enabled; disks reached over several paths are listed once per path", "error", err)
	}
}
