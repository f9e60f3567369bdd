package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestOrDiscard(t *testing.T) {
	OrDiscard(nil).Error("dropped") // must not panic
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil))
	if OrDiscard(l) != l {
		t.Fatal("a given logger is not returned as is")
	}
}

func TestOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var o Once
	if !o.Warn(log, "a", "first") {
		t.Error("the first warning of a key was not logged")
	}
	if o.Warn(log, "a", "again") {
		t.Error("a second warning of the same key was logged")
	}
	if !o.Warn(log, "b", "other") {
		t.Error("the first warning of another key was not logged")
	}
	if got := strings.Count(buf.String(), "level=WARN"); got != 2 {
		t.Errorf("%d warnings logged, want 2:\n%s", got, buf.String())
	}
}
