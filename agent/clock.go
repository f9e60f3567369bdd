package agent

import (
	"context"
	"time"
)

// Clock is the agent's time source (start-up waits and deadlines, the
// heartbeat loop), injected so tests run schedules without sleeping.
type Clock interface {
	Now() time.Time
	// After delivers once d has passed (like time.After, but stoppable).
	After(d time.Duration) (<-chan time.Time, func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) After(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// sleep waits d on clock, or until ctx ends (then it returns ctx.Err()).
func sleep(ctx context.Context, clock Clock, d time.Duration) error {
	ch, stop := clock.After(d)
	defer stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
