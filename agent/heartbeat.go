package agent

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/ironic-go/ironic-agent/internal/clock"
	"github.com/ironic-go/ironic-agent/internal/logging"
)

// Heartbeat timing (IPA master, agent.py IronicPythonAgentHeartbeater).
const (
	// forcedHeartbeatGap: a forced heartbeat goes out once this much time
	// has passed since the previous one, not sooner.
	forcedHeartbeatGap = 5 * time.Second
	// errorHeartbeatBase: after a failed heartbeat the next one comes
	// errorHeartbeatBase x U(1, 2) later.
	errorHeartbeatBase = 5 * time.Second
)

// nextHeartbeatInterval returns the wait after a heartbeat: heartbeat_timeout
// x U(0.3, 0.6) after a success, 5 s x U(1, 2) after an error. u is uniform
// in [0, 1).
func nextHeartbeatInterval(success bool, heartbeatTimeout time.Duration, u float64) time.Duration {
	if success {
		return time.Duration(float64(heartbeatTimeout)*0.3 + float64(heartbeatTimeout)*0.3*u)
	}
	return time.Duration(float64(errorHeartbeatBase) * (1 + u))
}

// heartbeatSchedule is the state deciding when the next heartbeat is due.
type heartbeatSchedule struct {
	last     time.Time     // when the previous heartbeat was sent
	interval time.Duration // wait after it
	forced   bool          // an async command ended since
}

// due returns when the next heartbeat should be sent.
func (s heartbeatSchedule) due() time.Time {
	d := s.last.Add(s.interval)
	if s.forced {
		if f := s.last.Add(forcedHeartbeatGap); f.Before(d) {
			d = f
		}
	}
	return d
}

// Heartbeater sends heartbeats: the first at once, then on schedule, and
// soon after Force.
type Heartbeater struct {
	// Send makes one heartbeat; nil error means Ironic answered 202.
	Send func(ctx context.Context) error
	// Timeout returns the current heartbeat_timeout from lookup.
	Timeout func() time.Duration
	Clock   Clock
	// Float64 is uniform in [0, 1).
	Float64 func() float64
	Log     *slog.Logger

	force chan struct{}
}

// NewHeartbeater returns a heartbeater with the real clock and randomness.
func NewHeartbeater(send func(context.Context) error, timeout func() time.Duration, log *slog.Logger) *Heartbeater {
	return &Heartbeater{Send: send, Timeout: timeout, Clock: clock.Real{}, Float64: rand.Float64, Log: log, force: make(chan struct{}, 1)}
}

// Force asks for a heartbeat soon (after an async command ended), so Ironic
// polls the result without waiting a whole interval.
func (h *Heartbeater) Force() {
	select {
	case h.force <- struct{}{}:
	default:
	}
}

// Run heartbeats until ctx ends.
func (h *Heartbeater) Run(ctx context.Context) {
	if h.force == nil {
		h.force = make(chan struct{}, 1)
	}
	log := logging.OrDiscard(h.Log)
	var s heartbeatSchedule
	beat := func() {
		err := h.Send(ctx)
		if ctx.Err() != nil {
			return
		}
		s.last = h.Clock.Now()
		s.interval = nextHeartbeatInterval(err == nil, h.Timeout(), h.Float64())
		if err == nil {
			s.forced = false
			log.Info(EventHeartbeatSuccessful, "next_in", s.interval.Round(time.Millisecond))
		} else {
			log.Warn(EventHeartbeatFailed, "error", err, "retry_in", s.interval.Round(time.Millisecond))
		}
	}
	beat()
	for ctx.Err() == nil {
		wait := s.due().Sub(h.Clock.Now())
		if wait <= 0 {
			beat()
			continue
		}
		ch, stop := h.Clock.After(wait)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-h.force:
			stop()
			s.forced = true
		case <-ch:
			beat()
		}
	}
}
