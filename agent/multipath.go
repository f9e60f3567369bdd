package agent

import (
	"context"
	"time"

	"github.com/ironic-go/ironic-agent/collector"
	"github.com/ironic-go/ironic-agent/deploy/multipath"
	"github.com/ironic-go/ironic-agent/internal/devmapper"
)

// multipathOn says whether the agent keeps multipath maps: unless
// Options.DisableMultipath, on the live machine, for an agent that is not
// confined to allowed devices.
func (a *Agent) multipathOn() bool {
	return !a.opts.DisableMultipath && a.liveMachine() && len(a.cfg.AllowedDevices) == 0
}

// enableMultipath makes the machine's multipath maps, as IPA's initialize
// does through multipathd and `multipath -ll`: at start, before the wait
// for a root disk, and again whenever the disks or the inventory are
// listed, so two paths that appear late (a slow HBA) still make one map,
// as multipathd would gather them.
func (a *Agent) enableMultipath(ctx context.Context) {
	if !a.multipathOn() {
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

// watchMultipath is multipathd's checker loop for the ramdisk's life:
// every multipath.CheckInterval it runs a multipath.Checker pass, which
// fails a path that stops answering, reinstates one that answers again,
// takes a removed path out of its map and adds one that appears. It
// opens device-mapper only once there are paths to a LUN, and returns
// when ctx ends.
func (a *Agent) watchMultipath(ctx context.Context) {
	if !a.multipathOn() {
		return
	}
	checker := &multipath.Checker{Log: a.log}
	var ctl *devmapper.Control
	defer func() {
		if ctl != nil {
			ctl.Close()
		}
	}()
	t := time.NewTicker(multipath.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.multipathMu.Lock()
		// No logger: a warning about an odd disk was logged at start and
		// need not come every few seconds.
		paths, err := collector.MultipathPaths(ctx, collector.Options{Root: "/"})
		if err == nil && ctl == nil && multipath.Wanted(paths) {
			if ctl, err = devmapper.Open(); err != nil {
				a.log.Warn("multipath: paths to one LUN found, but device-mapper cannot be used; paths are not checked", "error", err)
				a.multipathMu.Unlock()
				return
			}
		}
		var probes multipath.Probes
		if err == nil && ctl != nil {
			_, probes = checker.Reconcile(ctx, ctl, paths)
		}
		a.multipathMu.Unlock()
		// Without the lock: a path that hangs keeps the probes waiting
		// up to their timeout, and a disk listing must not wait for it.
		if ctl != nil {
			checker.Check(ctx, ctl, probes)
		}
	}
}
