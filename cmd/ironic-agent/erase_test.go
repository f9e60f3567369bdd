package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

// TestMain runs the tests in a private mount namespace: their mounts and
// loop devices go with the test binary, even when it is killed.
func TestMain(m *testing.M) { looptest.Main(m.Run) }

// eraseCLI runs the erase command with stdin, not the test's own stdin
// (a terminal when a developer runs go test would be asked).
func eraseCLI(stdin *os.File, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := exitCode(runErase(context.Background(), args, stdin, &out, &errb), "erase", &errb)
	return code, out.String(), errb.String()
}

func TestEraseUsage(t *testing.T) {
	if code, _, stderr := eraseCLI(nil, "--metadata"); code != 2 || !strings.Contains(stderr, "no DEVICE given") {
		t.Errorf("no device: %d %q", code, stderr)
	}
	if code, _, stderr := eraseCLI(nil, "/dev/nonexistent", "--metadata", "--full"); code != 2 || !strings.Contains(stderr, "exactly one of") {
		t.Errorf("two modes: %d %q", code, stderr)
	}
	if code, _, stderr := eraseCLI(nil, "/dev/a", "/dev/b", "--full"); code != 2 || !strings.Contains(stderr, "one DEVICE only") {
		t.Errorf("two devices: %d %q", code, stderr)
	}
	if code, _, stderr := eraseCLI(nil, "/dev/nonexistent-disk", "--metadata"); code != 1 || !strings.Contains(stderr, "refused by device guard") {
		t.Errorf("missing device: %d %q", code, stderr)
	}
}

// An image file named explicitly is erased like a disk (no root needed):
// the full erase finds no ATA/NVMe security on it and overwrites.
func TestEraseFileFull(t *testing.T) {
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, bytes.Repeat([]byte("secret"), 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := eraseCLI(nil, "--full", "--iterations", "2", "--yes", img)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "full erase of "+img+" done") || !strings.Contains(stdout, "overwrite: 2 random pass(es) + zero pass, 18.0 MiB written") {
		t.Errorf("final line: %q", stdout)
	}
	if !strings.Contains(stderr, "pass 3/3 100.0%") {
		t.Errorf("progress: %q", stderr)
	}
	b, _ := os.ReadFile(img)
	if !bytes.Equal(b, make([]byte, len(b))) {
		t.Error("file not zeroed")
	}
}

func TestEraseLoopMetadata(t *testing.T) {
	looptest.RequireRoot(t, "sgdisk", "mkfs.ext4", "blkid", "partx")
	dev := looptest.Attach(t, 64<<20, "--partscan")
	for _, c := range [][]string{{"sgdisk", "-n", "1:2048:+16M", dev}, {"partx", "-u", dev}, {"mkfs.ext4", "-q", "-F", dev + "p1"}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	code, stdout, stderr := eraseCLI(nil, dev, "--metadata", "--yes")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, dev+" (metadata wipe") || !strings.Contains(stdout, dev+"p1 (metadata wipe") {
		t.Errorf("final line: %q", stdout)
	}
	if out, err := exec.Command("blkid", "-p", dev).CombinedOutput(); err == nil {
		t.Errorf("blkid still finds: %s", out)
	}
}
