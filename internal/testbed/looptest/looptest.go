// Package looptest gives tests throw-away block devices: loop devices over
// sparse files in the test's temporary directory, never a disk the test did
// not create. Every device it attaches is detached by t.Cleanup, also when
// the test fails. It needs root and util-linux's losetup; Attach skips,
// loudly, without them.
package looptest

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RequireRoot skips the test, loudly, unless it runs as root with the
// named programs on PATH.
func RequireRoot(t testing.TB, programs ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: attaches loop devices")
	}
	RequireTools(t, programs...)
}

// RequireTools skips the test, loudly, unless the named programs are on
// PATH; ./test.sh installs every one of them.
func RequireTools(t testing.TB, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s on PATH (./test.sh APT_PACKAGES installs it): %v", p, err)
		}
	}
}

// Run runs a command and fails the test with its command line, exit status
// and output if it does not succeed.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Attach creates a sparse file of size bytes in the test's temporary
// directory and attaches it as a new loop device, with losetup's flags
// (e.g. "--partscan", "--sector-size", "4096"). It returns the device path.
func Attach(t testing.TB, size int64, flags ...string) string {
	t.Helper()
	RequireRoot(t, "losetup")
	f, err := os.Create(filepath.Join(t.TempDir(), "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return AttachFile(t, f.Name(), flags...)
}

// AttachFile attaches an image file the test made as a new loop device,
// with losetup's flags, and returns the device path.
func AttachFile(t testing.TB, img string, flags ...string) string {
	t.Helper()
	RequireRoot(t, "losetup")
	args := append(append([]string{"--find", "--show"}, flags...), img)
	// Other test binaries attach loop devices concurrently; losetup's
	// find-then-configure can lose that race, so retry a few times.
	var dev string
	for i := 0; ; i++ {
		out, err := exec.Command("losetup", args...).CombinedOutput()
		if err == nil {
			dev = strings.TrimSpace(string(out))
			break
		}
		if i == 5 {
			t.Fatalf("losetup %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.HasPrefix(dev, "/dev/loop") {
		t.Fatalf("losetup %s gave %q, not a loop device", strings.Join(args, " "), dev)
	}
	t.Cleanup(func() {
		// The kernel may still hold the device for a moment after a
		// partition re-read or an unmount; retry the detach briefly.
		var out []byte
		var err error
		for i := 0; i < 20; i++ {
			if out, err = exec.Command("losetup", "--detach", dev).CombinedOutput(); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("losetup --detach %s: %v: %s", dev, err, out)
	})
	return dev
}

// WaitFor waits for a device node to appear: udev or the kernel may be a
// moment behind a partition table change.
func WaitFor(t testing.TB, path string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not appear", path)
}

// ReadAt returns n bytes of dev from offset off, failing the test on a
// short read.
func ReadAt(t testing.TB, dev string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatalf("reading %d bytes of %s at %d: %v", n, dev, off, err)
	}
	return b
}

// Size returns the size of dev in bytes.
func Size(t testing.TB, dev string) int64 {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatalf("size of %s: %v", dev, err)
	}
	return size
}

// WriteAt writes b to dev at offset off and syncs it.
func WriteAt(t testing.TB, dev string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatalf("writing %d bytes to %s at %d: %v", len(b), dev, off, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// BlkidProbe returns blkid's low-level probe of dev as KEY=value lines, ""
// when it finds nothing (blkid exits 2).
func BlkidProbe(t testing.TB, dev string) string {
	t.Helper()
	out, err := exec.Command("blkid", "-p", "-o", "export", dev).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		return ""
	}
	if err != nil {
		t.Fatalf("blkid -p %s: %v\n%s", dev, err, out)
	}
	return strings.TrimSpace(string(out))
}
