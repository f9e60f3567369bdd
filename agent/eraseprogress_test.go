package agent

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A slow overwrite logs its progress every interval per device and at the
// end of each pass, not on every chunk.
func TestEraseProgressThrottles(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	now := time.Unix(1700000000, 0)
	p := eraseProgress(log, 10*time.Second, func() time.Time { return now })
	const mib = 1 << 20
	for i := int64(1); i <= 8; i++ {
		now = now.Add(3 * time.Second) // a 4 MiB chunk every 3 s
		p("/dev/sda", 1, 2, i*4*mib, 32*mib)
		p("/dev/sdb", 1, 2, i*4*mib, 64*mib)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var sda, sdb []string
	for _, l := range lines {
		switch {
		case strings.Contains(l, "device=/dev/sda"):
			sda = append(sda, l)
		case strings.Contains(l, "device=/dev/sdb"):
			sdb = append(sdb, l)
		}
	}
	// sda: at 12 s (16 MiB), 24 s (32 MiB, also the pass's end).
	if len(sda) != 2 || !strings.Contains(sda[0], "bytes=16777216") || !strings.Contains(sda[1], "bytes=33554432") || !strings.Contains(sda[1], "elapsed=24s") {
		t.Errorf("sda progress:\n%s", strings.Join(sda, "\n"))
	}
	// sdb (no pass end yet): at 12 s and 24 s.
	if len(sdb) != 2 || !strings.Contains(sdb[0], `msg="erase progress"`) || !strings.Contains(sdb[0], "pass=1 passes=2") {
		t.Errorf("sdb progress:\n%s", strings.Join(sdb, "\n"))
	}
}

// A manager built without a logger (tests, downstream builds) still erases.
func TestEraseProgressNilLogger(t *testing.T) {
	p := eraseProgress(nil, time.Second, time.Now)
	p("/dev/sda", 1, 1, 1<<20, 1<<20)
}
