package agent

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ironic-go/ironic-agent/internal/logging"
)

// eraseProgressInterval is how often a running erase step logs progress: a
// slow disk then shows as a count that moves, a stuck one as a count that
// does not, never as an erase step that says nothing for hours.
const eraseProgressInterval = 10 * time.Second

// eraseProgress follows the overwrite passes of one erase step (the
// Eraser's Progress callback feeds it) and logs where each device is on
// every tick while the step runs.
type eraseProgress struct {
	log   *slog.Logger
	start time.Time
	mu    sync.Mutex
	devs  map[string]erasePass
}

// erasePass is where one device's overwrite is: bytes done of its pass.
type erasePass struct {
	pass, passes int
	done, total  int64
}

func newEraseProgress(log *slog.Logger, start time.Time) *eraseProgress {
	return &eraseProgress{log: logging.OrDiscard(log), start: start, devs: map[string]erasePass{}}
}

// update is erase.Progress; devices are erased concurrently.
func (p *eraseProgress) update(dev string, pass, passes int, done, total int64) {
	p.mu.Lock()
	p.devs[dev] = erasePass{pass: pass, passes: passes, done: done, total: total}
	p.mu.Unlock()
}

// report logs one line per device that has written something, or one
// saying the step still runs when none has (a first write that has not
// come back, or a method that reports no bytes: a format, a discard).
func (p *eraseProgress) report(now time.Time) {
	p.mu.Lock()
	devs := maps.Clone(p.devs)
	p.mu.Unlock()
	elapsed := now.Sub(p.start).Round(time.Second)
	if len(devs) == 0 {
		p.log.Info(EventEraseProgress, "written", "nothing reported yet", "elapsed", elapsed)
		return
	}
	for _, d := range slices.Sorted(maps.Keys(devs)) {
		s := devs[d]
		p.log.Info(EventEraseProgress, "device", d, "pass", s.pass, "passes", s.passes, "bytes", s.done, "total", s.total, "elapsed", elapsed)
	}
}

// run reports on every tick until ctx ends.
func (p *eraseProgress) run(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case t := <-tick:
			p.report(t)
		}
	}
}
