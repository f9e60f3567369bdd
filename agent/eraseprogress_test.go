package agent

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Every tick logs where each device's overwrite is, sorted by device; a
// tick before any write came back says the step still runs.
func TestEraseProgressReports(t *testing.T) {
	var buf bytes.Buffer
	start := time.Unix(1700000000, 0)
	p := newEraseProgress(slog.New(slog.NewTextHandler(&buf, nil)), start)
	p.report(start.Add(10 * time.Second))
	if got := buf.String(); !strings.Contains(got, `msg="erase progress" written="nothing reported yet" elapsed=10s`) {
		t.Errorf("before any write:\n%s", got)
	}
	buf.Reset()
	const mib = 1 << 20
	p.update("/dev/sdb", 1, 2, 4*mib, 64*mib)
	p.update("/dev/sda", 1, 2, 4*mib, 32*mib)
	p.update("/dev/sda", 2, 2, 8*mib, 32*mib)
	p.report(start.Add(20 * time.Second))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 ||
		!strings.Contains(lines[0], "device=/dev/sda pass=2 passes=2 bytes=8388608 total=33554432 elapsed=20s") ||
		!strings.Contains(lines[1], "device=/dev/sdb pass=1 passes=2 bytes=4194304 total=67108864 elapsed=20s") {
		t.Errorf("progress:\n%s", buf.String())
	}
}

// run reports once per tick and returns when its context ends; a manager
// built without a logger (tests, downstream builds) still erases.
func TestEraseProgressRun(t *testing.T) {
	var buf bytes.Buffer
	p := newEraseProgress(slog.New(slog.NewTextHandler(&buf, nil)), time.Unix(0, 0))
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx, tick) }()
	tick <- time.Unix(10, 0)
	tick <- time.Unix(20, 0)
	cancel()
	<-done
	if n := strings.Count(buf.String(), `msg="erase progress"`); n != 2 {
		t.Errorf("%d reports for 2 ticks:\n%s", n, buf.String())
	}
	newEraseProgress(nil, time.Now()).report(time.Now())
}
