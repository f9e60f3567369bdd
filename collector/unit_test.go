package collector

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestUnitPanicIsOneWarning: a unit that panics costs one one-line warning
// naming the panic; the stack goes to the debug log only.
func TestUnitPanicIsOneWarning(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	boom := unit{"boom", func(context.Context, *collection) error { panic("garbled input") }}
	if _, err := collect(context.Background(), Options{Root: t.TempDir(), Logger: log}, []unit{boom}); err != nil {
		t.Fatal(err)
	}
	var warns, debugs []string
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		switch {
		case strings.Contains(line, "level=WARN"):
			warns = append(warns, line)
		case strings.Contains(line, "level=DEBUG"):
			debugs = append(debugs, line)
		}
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "unit=boom") || !strings.Contains(warns[0], "panic: garbled input") ||
		strings.Contains(warns[0], "goroutine") {
		t.Errorf("warnings %q; want one line naming the unit and the panic, without a stack", warns)
	}
	if len(debugs) != 1 || !strings.Contains(debugs[0], "stack=") || !strings.Contains(debugs[0], "goroutine") {
		t.Errorf("debug lines %q; want the stack", debugs)
	}
}
