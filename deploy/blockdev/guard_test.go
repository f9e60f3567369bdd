package blockdev

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/inventory"
)

// TestMain runs the tests in a private mount namespace: their mounts and
// loop devices go with the test binary, even when it is killed.
func TestMain(m *testing.M) { looptest.Main(m.Run) }

func TestGuardRefusesUnlisted(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.img")
	b := filepath.Join(dir, "b.img")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	g := NewGuard([]string{a})
	if err := g.Check(a); err != nil {
		t.Errorf("allowed file refused: %v", err)
	}
	if err := g.Check(link); err != nil {
		t.Errorf("symlink to allowed file refused: %v", err)
	}
	err := g.Check(b)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "not in the allowed devices") {
		t.Errorf("unlisted file: got %v", err)
	}
	if err := g.Check(""); !errors.Is(err, ErrRefused) {
		t.Errorf("empty name: got %v", err)
	}
	if err := g.Check(filepath.Join(dir, "missing")); !errors.Is(err, ErrRefused) {
		t.Errorf("missing device: got %v", err)
	}
	// A regular file is never allowed without an explicit listing.
	if err := NewGuard(nil).Check(a); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "not a block device") {
		t.Errorf("unlisted regular file with empty allow list: got %v", err)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/a\040b`: "/mnt/a b",
		`/plain`:      "/plain",
		`/x\`:         `/x\`,
		`\134`:        `\`,
	} {
		if got := UnescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// rootDevice returns the block device mounted on / if it is one, for the
// test that the Guard refuses it; it only reads.
func rootDevice(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Skip("SKIPPED: no /proc/self/mounts")
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[1] == "/" && strings.HasPrefix(f[0], "/dev/") {
			return f[0]
		}
	}
	t.Skip("SKIPPED: / is not on a block device here (overlay or tmpfs root)")
	return ""
}

func TestGuardRefusesRootFilesystemDisk(t *testing.T) {
	dev := rootDevice(t)
	err := NewGuard(nil).Check(dev)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "root filesystem") {
		t.Fatalf("Check(%s) of the running root: got %v", dev, err)
	}
	// Even when listed explicitly.
	if err := NewGuard([]string{dev}).Check(dev); !errors.Is(err, ErrRefused) {
		t.Fatalf("Check(%s) with it allowed: got %v", dev, err)
	}
	disks := []inventory.Disk{{Name: dev}}
	if got := NewGuard(nil).Filter(disks); len(got) != 0 {
		t.Fatalf("Filter kept the root disk: %+v", got)
	}
}

func TestGuardLoopDevices(t *testing.T) {
	a := looptest.Attach(t, 64<<20, "--partscan")
	b := looptest.Attach(t, 64<<20, "--partscan")
	g := NewGuard([]string{a})
	if err := g.Check(a); err != nil {
		t.Fatalf("allowed loop refused: %v", err)
	}
	if err := g.Check(b); !errors.Is(err, ErrRefused) {
		t.Fatalf("second loop not refused: %v", err)
	}
	got := g.Filter([]inventory.Disk{{Name: b}, {Name: a}, {Name: "/dev/vda"}})
	if len(got) != 1 || got[0].Name != a {
		t.Fatalf("Filter = %+v, want only %s", got, a)
	}
	if err := NewGuard(nil).Check(b); err != nil {
		t.Fatalf("empty allow list refused an unused loop: %v", err)
	}
}

func TestGuardRefusesMountedPartition(t *testing.T) {
	looptest.RequireTools(t, "sgdisk", "mkfs.ext4", "mount", "umount")
	dev := looptest.Attach(t, 64<<20, "--partscan")
	looptest.Run(t, "sgdisk", "-n", "1:2048:+16M", dev)
	part := dev + "p1"
	looptest.Run(t, "partx", "-u", dev)
	looptest.WaitFor(t, part)
	looptest.Run(t, "mkfs.ext4", "-q", part)
	mnt := t.TempDir()
	looptest.Run(t, "mount", part, mnt)
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	g := NewGuard([]string{dev, part})
	for _, d := range []string{dev, part} {
		err := g.Check(d)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "mounted on "+mnt) {
			t.Errorf("Check(%s) with %s mounted: got %v", d, part, err)
		}
	}
	looptest.Run(t, "umount", mnt)
	if err := g.Check(dev); err != nil {
		t.Errorf("after umount: %v", err)
	}
}
