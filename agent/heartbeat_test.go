package agent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestHeartbeatInterval(t *testing.T) {
	cases := []struct {
		ok   bool
		u    float64
		want time.Duration
	}{
		{true, 0, 90 * time.Second},    // 300 s x 0.3
		{true, 0.5, 135 * time.Second}, // x 0.45
		{true, 0.999, 179910 * time.Millisecond},
		{false, 0, 5 * time.Second}, // 5 s x 1
		{false, 0.5, 7500 * time.Millisecond},
	}
	for _, c := range cases {
		if got := nextHeartbeatInterval(c.ok, 300*time.Second, c.u); got != c.want {
			t.Errorf("ok=%v u=%v: %v, want %v", c.ok, c.u, got, c.want)
		}
	}
}

func TestHeartbeatScheduleForced(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := heartbeatSchedule{last: t0, interval: 90 * time.Second}
	if got := s.due(); !got.Equal(t0.Add(90 * time.Second)) {
		t.Errorf("due %v", got)
	}
	s.forced = true
	if got := s.due(); !got.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("forced due %v, want 5 s after the previous heartbeat", got)
	}
	s.interval = 2 * time.Second
	if got := s.due(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("forced but interval shorter: %v", got)
	}
}

// fakeClock advances only when the loop waits, so the whole schedule runs
// instantly and deterministically.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- now
	return ch, func() {}
}

func TestHeartbeaterSchedule(t *testing.T) {
	clock := &fakeClock{now: time.Unix(0, 0)}
	var sent []time.Duration
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := []error{nil, errors.New("HTTP 409"), errors.New("connection refused"), nil, nil}
	h := NewHeartbeater(func(context.Context) error {
		n := len(sent)
		sent = append(sent, clock.Now().Sub(time.Unix(0, 0)))
		if n+1 >= len(results) {
			cancel()
			return nil
		}
		return results[n]
	}, func() time.Duration { return 10 * time.Second }, nil)
	h.Clock = clock
	h.Float64 = func() float64 { return 0.5 }
	h.Run(ctx)
	// 0: first at once; +4.5 s (10 x 0.45) after success; +7.5 s (5 x 1.5)
	// after each error; then +4.5 s.
	want := []time.Duration{0, 4500 * time.Millisecond, 12 * time.Second, 19500 * time.Millisecond, 24 * time.Second}
	if len(sent) != len(want) {
		t.Fatalf("sent at %v, want %v", sent, want)
	}
	for i := range want {
		if sent[i] != want[i] {
			t.Errorf("heartbeat %d at %v, want %v (all: %v)", i, sent[i], want[i], sent)
		}
	}
}
