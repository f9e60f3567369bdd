package collector

import (
	"context"
	"log/slog"
	"sync"
	"testing"
)

// logRecorder is a slog handler that keeps every record (for tests that
// count warnings) and echoes it to the test log.
type logRecorder struct {
	t       testing.TB
	mu      *sync.Mutex
	records *[]slog.Record
}

func newLogRecorder(t testing.TB) (*slog.Logger, func() []slog.Record) {
	h := logRecorder{t: t, mu: &sync.Mutex{}, records: &[]slog.Record{}}
	return slog.New(h), func() []slog.Record {
		h.mu.Lock()
		defer h.mu.Unlock()
		return append([]slog.Record(nil), *h.records...)
	}
}

func (h logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	*h.records = append(*h.records, r.Clone())
	h.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	h.t.Log(r.Level.String() + " " + msg)
	return nil
}

func (h logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logRecorder) WithGroup(string) slog.Handler      { return h }

func testLogger(t testing.TB) *slog.Logger {
	l, _ := newLogRecorder(t)
	return l
}
