package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

// A GPT image written to a larger disk gets its backup header moved to
// the disk's end, and sgdisk then finds nothing to complain about.
func TestFixGPTBackup(t *testing.T) {
	looptest.RequireTools(t, "sgdisk")
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	os.WriteFile(img, nil, 0o600)
	os.Truncate(img, 8<<20)
	looptest.Run(t, "sgdisk", "-n", "1:2048:0", "-t", "1:8300", img)
	b, _ := os.ReadFile(img)
	disk := filepath.Join(dir, "disk")
	os.WriteFile(disk, b, 0o600)
	os.Truncate(disk, 32<<20)
	out, _ := exec.Command("sgdisk", "-v", disk).CombinedOutput()
	if !strings.Contains(string(out), "backup header") && !strings.Contains(string(out), "problem") {
		t.Logf("sgdisk -v before: %s", out)
	}
	g := blockdev.NewGuard([]string{disk})
	moved, err := FixGPTBackup(g, disk)
	if err != nil || !moved {
		t.Fatalf("moved %v err %v", moved, err)
	}
	out, err = exec.Command("sgdisk", "-v", disk).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "No problems found") {
		t.Errorf("sgdisk -v after: %v\n%s", err, out)
	}
	if moved, err := FixGPTBackup(g, disk); err != nil || moved {
		t.Errorf("second call: moved %v err %v", moved, err)
	}
	mbrOnly := filepath.Join(dir, "raw")
	os.WriteFile(mbrOnly, make([]byte, 1<<20), 0o600)
	if moved, err := FixGPTBackup(blockdev.NewGuard([]string{mbrOnly}), mbrOnly); err != nil || moved {
		t.Errorf("no GPT: moved %v err %v", moved, err)
	}
}

func TestFixGPTBackupOnLoop(t *testing.T) {
	looptest.RequireRoot(t)
	looptest.RequireTools(t, "sgdisk")
	raw := diskImage(t, 16<<20)
	dev := looptest.Attach(t, 24<<20, "--partscan")
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(raw)
	f.Close()
	moved, err := FixGPTBackup(blockdev.NewGuard([]string{dev}), dev)
	if err != nil || !moved {
		t.Fatalf("moved %v err %v", moved, err)
	}
	if out, err := exec.Command("sgdisk", "-v", dev).CombinedOutput(); err != nil || !strings.Contains(string(out), "No problems found") {
		t.Errorf("sgdisk -v: %v\n%s", err, out)
	}
	if err := ValidatePartitioning(dev); err != nil {
		t.Error(err)
	}
}
