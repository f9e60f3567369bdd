package rdinit

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWaitCarrier(t *testing.T) {
	p := filepath.Join(t.TempDir(), "carrier")
	if waitCarrier(context.Background(), p, 50*time.Millisecond) {
		t.Error("no carrier file: reported up")
	}
	os.WriteFile(p, []byte("0\n"), 0o644)
	go func() {
		time.Sleep(60 * time.Millisecond)
		os.WriteFile(p+".new", []byte("1\n"), 0o644)
		os.Rename(p+".new", p)
	}()
	if !waitCarrier(context.Background(), p, 5*time.Second) {
		t.Error("carrier came up: reported down")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	os.WriteFile(p, []byte("0\n"), 0o644)
	if waitCarrier(ctx, p, time.Hour) {
		t.Error("cancelled: reported up")
	}
}
