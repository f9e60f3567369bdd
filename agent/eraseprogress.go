package agent

import (
	"log/slog"
	"sync"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/internal/logging"
)

// eraseProgressInterval is how often a running overwrite logs progress: a
// slow or struggling disk then shows as a count that moves (or stops), not
// as an erase step that says nothing for hours.
const eraseProgressInterval = 10 * time.Second

// eraseProgress returns the Eraser's progress callback: per device, a log
// line at most every interval since the step started (now is the clock),
// and one at the end of each pass. Devices are erased concurrently, so
// the callback is safe for concurrent use.
func eraseProgress(log *slog.Logger, interval time.Duration, now func() time.Time) erase.Progress {
	log = logging.OrDiscard(log)
	var mu sync.Mutex
	start := now()
	last := map[string]time.Time{}
	return func(dev string, pass, passes int, done, total int64) {
		t := now()
		mu.Lock()
		prev, ok := last[dev]
		if !ok {
			prev = start
		}
		due := t.Sub(prev) >= interval || done >= total
		if due {
			last[dev] = t
		}
		mu.Unlock()
		if !due {
			return
		}
		log.Info("erase progress", "device", dev, "pass", pass, "passes", passes, "bytes", done, "total", total,
			"elapsed", t.Sub(start).Round(time.Second))
	}
}
