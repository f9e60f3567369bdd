package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCaptureFixtureCommand records this machine with the command and
// replays the tree with `inventory --root`: the output must equal the
// recorded inventory.json byte for byte.
func TestCaptureFixtureCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "this-machine")
	var stdout, stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"capture-fixture", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("capture-fixture exited %d: %s", code, stderr.String())
	}
	want, err := os.ReadFile(filepath.Join(dir, "inventory.json"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil || !strings.Contains(string(readme), "capture-fixture") {
		t.Errorf("README.md = %q, %v", readme, err)
	}
	stdout.Reset()
	if code := runMain(context.Background(), []string{"inventory", "--root", filepath.Join(dir, "root")}, &stdout, &stderr); code != 0 {
		t.Fatalf("inventory --root exited %d: %s", code, stderr.String())
	}
	if stdout.String() != string(want) {
		t.Errorf("inventory of the captured tree differs from the recorded one:\n%s\nwant:\n%s", stdout.String(), want)
	}
	// A second capture into the same directory is refused.
	if code := runMain(context.Background(), []string{"capture-fixture", dir}, &stdout, &stderr); code == 0 {
		t.Error("second capture into the same directory succeeded")
	}
	if code := runMain(context.Background(), []string{"capture-fixture"}, &stdout, &stderr); code != 2 {
		t.Errorf("capture-fixture without DIR exited %d, want 2 (usage)", code)
	}
}
