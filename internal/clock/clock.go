// Package clock is the one home of the context-aware sleep: the agent's
// start-up waits, the Ironic lookup's back-off, the image download's
// retries and the RAID re-add retries all wait through it. It imports only
// the standard library, so every product package may use it.
package clock

import (
	"context"
	"time"
)

// Clock is a time source that tests replace to run schedules without
// sleeping.
type Clock interface {
	Now() time.Time
	// After delivers once d has passed (like time.After, but stoppable).
	After(d time.Duration) (<-chan time.Time, func())
}

// Real is the system clock.
type Real struct{}

// Now is time.Now.
func (Real) Now() time.Time { return time.Now() }

// After starts a timer of d; the func stops it.
func (Real) After(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// Sleep waits d of real time, or until ctx ends (then it returns
// ctx.Err()). A d of zero or less returns at once, with ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return SleepOn(ctx, Real{}, d)
}

// SleepOn waits d on c, or until ctx ends (then it returns ctx.Err()).
func SleepOn(ctx context.Context, c Clock, d time.Duration) error {
	ch, stop := c.After(d)
	defer stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
