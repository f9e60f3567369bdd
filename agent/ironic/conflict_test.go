package ironic

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestLookupConflictPausesAsIPA13 pins the lookup's answer to 409
// (NodeLocked: Ironic 35 answers it while continue_inspection's hooks hold
// the node, the fast-track case) to IPA 13's: _do_lookup sleeps
// lookup_lock_pause, 5 s, then 10, then 30 for good, a count no other
// failure resets, and tenacity's wait_random_exponential(min=interval)
// comes on top (here at its minimum, the 1 s interval).
func TestLookupConflictPausesAsIPA13(t *testing.T) {
	_, srv := ironic214(t, 409, 409, 404, 409, 409)
	c, err := NewClient([]string{srv.URL}, srv.Client(), "1.82")
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBackoff{now: time.Unix(0, 0)}
	if _, err := c.LookupNode(context.Background(), fb.backoff(0), []string{"52:54:a9:7e:01:01"}, "", 300*time.Second, time.Second); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{6 * time.Second, 11 * time.Second, time.Second, 31 * time.Second, 31 * time.Second}
	if !slices.Equal(fb.sleeps, want) {
		t.Errorf("sleeps %v, want %v (IPA 13: 5, 10, 30, 30 s after each 409, plus 1 s)", fb.sleeps, want)
	}
}
