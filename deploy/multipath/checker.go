package multipath

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ironic-go/ironic-agent/internal/devmapper"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/inventory"
)

// Control is what Checker needs of device-mapper; *devmapper.Control is
// one.
type Control interface {
	Mapper
	Load(ctx context.Context, name string, table []devmapper.Target) error
	Status(name string, table bool) ([]devmapper.Target, error)
	Message(name, msg string) error
}

// Probe reads the path device dev (/dev/sdb) and returns nil if it
// answers; DirectIO is multipath-tools' directio checker.
type Probe func(ctx context.Context, dev string) error

// DefaultCheckTimeout bounds one probe, as multipathd's checker_timeout
// (the SCSI command timeout, 30 s by default): a path that has not
// answered by then is failed.
const DefaultCheckTimeout = 30 * time.Second

// CheckInterval is multipathd's polling_interval default: how often the
// agent runs a Pass.
const CheckInterval = 5 * time.Second

// Checker keeps the multipath maps of a machine working as multipathd's
// checker loop and uevent handling do, for as long as the ramdisk runs:
// each Pass
//   - makes the maps of LUNs that have none yet (Plan, Assemble);
//   - takes out of its map a path whose device is gone (a removed or
//     replaced SCSI device: a new device may reuse the old one's
//     major:minor, and device-mapper would find the dead one by that
//     number, so the map is reloaded without it first);
//   - adds to its map a path that appeared after the map was made (a
//     slow HBA, a path brought back);
//   - probes every path of every map and tells the kernel to fail a path
//     that does not answer and to reinstate a failed one that does
//     (dm-multipath fails a path on an I/O error by itself but never
//     reinstates one: that is the checker's work).
//
// A Checker is used by one goroutine at a time; probes still running
// when a Pass returns (a path that hangs) are waited for by the next.
type Checker struct {
	// Probe checks one path; nil is DirectIO.
	Probe Probe
	// Timeout bounds one probe; 0 is DefaultCheckTimeout.
	Timeout time.Duration
	Log     *slog.Logger

	mu      sync.Mutex
	pending map[string]chan error // probes from an earlier pass, by device
	said    logging.Once          // warnings already logged once
}

// probeJob is one path of one map to check.
type probeJob struct {
	mapName string
	path    inventory.MultipathPath
	active  bool
	result  chan error
}

// Pass runs one round over paths (collector.MultipathPaths of the
// machine) and returns the device nodes of the maps it made.
func (c *Checker) Pass(ctx context.Context, ctl Control, paths []inventory.MultipathPath) []string {
	made, probes := c.Reconcile(ctx, ctl, paths)
	c.Check(ctx, ctl, probes)
	return made
}

// Probes are the paths of the maps a Reconcile saw, for Check.
type Probes struct{ jobs []probeJob }

// Reconcile is the first half of a Pass: it makes the new maps and brings
// the existing maps' tables in line with paths, and returns the device
// nodes of the maps it made and the paths to probe. It changes the maps;
// Check, which may wait for a path that hangs, does not, so a caller that
// serialises map changes needs to hold its lock for Reconcile only.
func (c *Checker) Reconcile(ctx context.Context, ctl Control, paths []inventory.MultipathPath) ([]string, Probes) {
	log := logging.OrDiscard(c.Log)
	made := Assemble(ctx, ctl, paths, log)
	var jobs []probeJob
	for _, name := range mapNames(paths) {
		if ctx.Err() != nil {
			return made, Probes{}
		}
		jobs = append(jobs, c.keep(ctx, ctl, name, paths, log)...)
	}
	return made, Probes{jobs: jobs}
}

// Check is the second half of a Pass: it probes the paths (at most
// Timeout) and fails or reinstates each whose answer says so.
func (c *Checker) Check(ctx context.Context, ctl Control, p Probes) {
	log := logging.OrDiscard(c.Log)
	jobs := p.jobs
	c.probe(ctx, jobs)
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	expired := false
	for _, j := range jobs {
		var err error
		if !expired {
			select {
			case err = <-j.result:
				c.donePending(j.path.Name)
			case <-deadline.C:
				expired = true
			case <-ctx.Done():
				return
			}
		}
		if expired {
			select {
			case err = <-j.result:
				c.donePending(j.path.Name)
			default:
				// The probe goes on; a later pass takes its answer.
				err = fmt.Errorf("no answer in %s", timeout)
			}
		}
		dev := devOf(j.path)
		switch {
		case err == nil && !j.active:
			if merr := ctl.Message(j.mapName, "reinstate_path "+dev); merr != nil {
				log.Warn("multipath: cannot reinstate a path that answers again", "map", j.mapName, "path", j.path.Name, "dev", dev, "error", merr)
				continue
			}
			log.Info("multipath path reinstated", "map", j.mapName, "path", j.path.Name, "dev", dev)
		case err != nil && j.active:
			if merr := ctl.Message(j.mapName, "fail_path "+dev); merr != nil {
				log.Warn("multipath: cannot fail a path that does not answer", "map", j.mapName, "path", j.path.Name, "dev", dev, "error", merr)
				continue
			}
			log.Warn("multipath path failed: it does not answer", "map", j.mapName, "path", j.path.Name, "dev", dev, "error", err)
		}
	}
}

// keep brings the map name's table in line with its paths (paths gone
// out, paths come in) and returns the probes of its paths.
func (c *Checker) keep(ctx context.Context, ctl Control, name string, paths []inventory.MultipathPath, log *slog.Logger) []probeJob {
	var members []inventory.MultipathPath
	for _, p := range paths {
		if p.Map == name {
			members = append(members, p)
		}
	}
	targets, states, err := mapStatus(ctl, name)
	if err != nil {
		c.said.Warn(log, "status "+name, "multipath: cannot read a map's paths; not checked", "map", name, "error", err)
		return nil
	}
	sectors := targets[0].Length
	isMember := map[string]bool{}
	for _, p := range members {
		isMember[devOf(p)] = true
	}
	var gone []string
	for _, s := range states {
		if !isMember[s.Dev] {
			gone = append(gone, s.Dev)
		}
	}
	// Paths to this map's LUN that nothing holds: new, or back.
	var add []inventory.MultipathPath
	wwid := members[0].WWID
	for _, p := range paths {
		if p.WWID != wwid || p.Held || p.Map != "" {
			continue
		}
		if uint64(p.Sectors) != sectors {
			c.said.Warn(log, "size "+name+" "+p.Name, "multipath: a path to a map's LUN has another size; not added", "map", name, "path", p.Name,
				"sectors", p.Sectors, "map_sectors", sectors)
			continue
		}
		add = append(add, p)
	}
	m := Map{Name: name, Sectors: int64(sectors), Paths: members}
	if len(gone) > 0 {
		if err := ctl.Load(ctx, name, m.Table()); err != nil {
			log.Warn("multipath: cannot take gone paths out of their map", "map", name, "gone", strings.Join(gone, ","), "error", err)
			return nil
		}
		log.Warn("multipath path gone: taken out of its map", "map", name, "gone", strings.Join(gone, ","), "paths", pathNames(members))
	}
	if len(add) > 0 {
		m.Paths = append(slices.Clone(members), add...)
		slices.SortStableFunc(m.Paths, func(a, b inventory.MultipathPath) int {
			return cmpDev(a, b)
		})
		if err := ctl.Load(ctx, name, m.Table()); err != nil {
			log.Warn("multipath: cannot add paths to their map", "map", name, "add", pathNames(add), "error", err)
			m.Paths = members
		} else {
			log.Info(EventPathAdded, "map", name, "added", pathNames(add), "paths", pathNames(m.Paths))
		}
	}
	if len(gone) > 0 || len(m.Paths) != len(members) {
		if _, states, err = mapStatus(ctl, name); err != nil {
			log.Warn("multipath: cannot read a map's paths after a reload; not checked", "map", name, "error", err)
			return nil
		}
	}
	byDev := map[string]inventory.MultipathPath{}
	for _, p := range m.Paths {
		byDev[devOf(p)] = p
	}
	var jobs []probeJob
	for _, s := range states {
		if p, ok := byDev[s.Dev]; ok {
			jobs = append(jobs, probeJob{mapName: name, path: p, active: s.Active})
		}
	}
	return jobs
}

// probe starts each job's probe, or takes over one still running from
// an earlier pass, and sets its result channel.
func (c *Checker) probe(ctx context.Context, jobs []probeJob) {
	probe := c.Probe
	if probe == nil {
		probe = DirectIO
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = map[string]chan error{}
	}
	for i := range jobs {
		name := jobs[i].path.Name
		ch, ok := c.pending[name]
		if !ok {
			ch = make(chan error, 1)
			c.pending[name] = ch
			// Not tied to ctx: a read of a dead path ends when the
			// kernel gives up on it, whatever the caller does.
			go func() { ch <- probe(context.WithoutCancel(ctx), "/dev/"+name) }()
		}
		jobs[i].result = ch
	}
}

func (c *Checker) donePending(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, name)
}

// mapStatus reads the map's one multipath target and its paths.
func mapStatus(ctl Control, name string) ([]devmapper.Target, []PathState, error) {
	targets, err := ctl.Status(name, false)
	if err != nil {
		return nil, nil, err
	}
	if len(targets) != 1 || targets[0].Type != "multipath" {
		return nil, nil, fmt.Errorf("map %s has %d targets (%v), want one multipath target", name, len(targets), targets)
	}
	states, err := ParseStatus(targets[0].Params)
	if err != nil {
		return nil, nil, err
	}
	return targets, states, nil
}

// mapNames returns the multipath maps holding any of paths, in order.
func mapNames(paths []inventory.MultipathPath) []string {
	var names []string
	for _, p := range paths {
		if p.Map != "" && !slices.Contains(names, p.Map) {
			names = append(names, p.Map)
		}
	}
	return names
}

func devOf(p inventory.MultipathPath) string { return fmt.Sprintf("%d:%d", p.Major, p.Minor) }

func cmpDev(a, b inventory.MultipathPath) int {
	return cmp.Or(cmp.Compare(a.Major, b.Major), cmp.Compare(a.Minor, b.Minor))
}
