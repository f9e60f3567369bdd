package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// The help of run is what an operator reads first: grouped options with
// placeholders, kernel parameters and defaults, no test-only flags. The
// golden file shows any change in review.
func TestRunHelpGolden(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"run", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got := stderr.Bytes()
	golden := filepath.Join("testdata", "run-help.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("run --help differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
	for _, bad := range []string{" value\n", "(default false)", "inventory-root"} {
		if bytes.Contains(got, []byte(bad)) {
			t.Errorf("run --help contains %q", bad)
		}
	}
}

// A flag left out of the help still works.
func TestRunHiddenFlagWorks(t *testing.T) {
	var stderr bytes.Buffer
	code := runMain(context.Background(), []string{"run", "--kernel-cmdline", "", "--config-dir", t.TempDir(), "--inventory-root", t.TempDir()}, &bytes.Buffer{}, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "no Ironic API URL") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}
