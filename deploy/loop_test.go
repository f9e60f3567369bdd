package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needRoot skips loudly when the test cannot create loop devices.
func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: " + why)
	}
}

// needTool skips loudly when an external program the test uses is missing;
// test.sh installs every one of them on CI.
func needTool(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("SKIPPED: needs %s (in test.sh APT_PACKAGES): %v", n, err)
		}
	}
}

// run runs a command and fails the test with its output on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newLoop creates a sparse file of size bytes and attaches it to a new loop
// device with partition scanning; the device is detached in cleanup, even
// when the test fails.
func newLoop(t *testing.T, size int64) string {
	t.Helper()
	needRoot(t, "attaches loop devices")
	needTool(t, "losetup")
	f, err := os.Create(filepath.Join(t.TempDir(), "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Other test binaries attach loop devices concurrently; losetup's
	// find-then-configure can lose that race, so retry a few times.
	var dev string
	for i := 0; ; i++ {
		out, err := exec.Command("losetup", "--find", "--show", "--partscan", f.Name()).CombinedOutput()
		if err == nil {
			dev = strings.TrimSpace(string(out))
			break
		}
		if i == 5 {
			t.Fatalf("losetup --find --show --partscan %s: %v\n%s", f.Name(), err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Cleanup(func() {
		// The kernel may still hold the device for a moment after a
		// partition re-read; retry the detach briefly.
		for i := 0; i < 20; i++ {
			if err := exec.Command("losetup", "-d", dev).Run(); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("could not detach %s", dev)
	})
	return dev
}

// waitFor waits for a device node to appear (udev or the kernel may be a
// moment behind a partition table change).
func waitFor(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 50; i++ {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not appear", path)
}
