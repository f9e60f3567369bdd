package agent

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/inventory"
)

// The start-up waits run on the injected clock: a minute of waiting for a
// NIC and ten root-disk attempts take no real time, and the deadline is
// the clock's.
func TestStartupWaitsUseClock(t *testing.T) {
	clock := &fakeClock{now: time.Unix(0, 0)}
	collected := 0
	a := &Agent{
		cfg: &config.Config{DiskWaitAttempts: 10, DiskWaitDelay: 3 * time.Second},
		log: slog.New(slog.DiscardHandler),
		opts: Options{Hooks: Hooks{
			Clock:         clock,
			InterfaceWait: time.Minute,
			Inventory: func(context.Context) (*inventory.Inventory, error) {
				collected++
				return &inventory.Inventory{}, nil
			},
			Disks: func(context.Context) ([]inventory.Disk, error) { return nil, nil },
		}},
	}
	ctx := context.Background()
	start := time.Now()
	if _, err := a.waitForInterfaces(ctx); err != nil {
		t.Fatal(err)
	}
	// Every 5 s until past the 60 s deadline: at 0, 5, ... 65 s.
	if collected != 14 || !clock.Now().Equal(time.Unix(65, 0)) {
		t.Errorf("collected %d times, clock at %v", collected, clock.Now().Unix())
	}
	if err := a.waitForRootDisk(ctx); err != nil {
		t.Fatal(err)
	}
	if got := clock.Now().Sub(time.Unix(65, 0)); got != 27*time.Second {
		t.Errorf("root disk wait took %v on the clock, want 9 delays of 3 s", got)
	}
	if real := time.Since(start); real > 5*time.Second {
		t.Errorf("the waits slept %v of real time", real)
	}
}
