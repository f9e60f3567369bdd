package clock

import (
	"context"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	ctx := context.Background()
	if err := Sleep(ctx, time.Millisecond); err != nil {
		t.Errorf("sleep: %v", err)
	}
	if err := Sleep(ctx, 0); err != nil {
		t.Errorf("sleep 0: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := Sleep(cancelled, time.Hour); err != context.Canceled {
		t.Errorf("sleep on a cancelled context: %v", err)
	}
	if err := Sleep(cancelled, 0); err != context.Canceled {
		t.Errorf("sleep 0 on a cancelled context: %v", err)
	}
	if err := SleepOn(cancelled, Real{}, time.Hour); err != context.Canceled {
		t.Errorf("SleepOn on a cancelled context: %v", err)
	}
}
