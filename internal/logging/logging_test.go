package logging

import (
	"bytes"
	"log/slog"
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
