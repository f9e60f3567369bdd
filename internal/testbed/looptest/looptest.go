// Package looptest gives tests throw-away block devices: loop devices over
// sparse files in the test's temporary directory, never a disk the test did
// not create. Every device it attaches is detached by t.Cleanup, also when
// the test fails, and by the kernel when the test binary is killed (a
// -timeout panic, SIGKILL): it is attached with LO_FLAGS_AUTOCLEAR, and
// the test holds it open, so it goes with the last file or mount using it.
// Main, the TestMain of every package whose tests mount filesystems, runs
// the tests in a private mount namespace, so those mounts go with the
// test binary too. Attach needs root; it skips, loudly, without it.
package looptest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
// ("--partscan", "--sector-size", "4096", "--read-only", "--direct-io").
// It returns the device path.
func Attach(t testing.TB, size int64, flags ...string) string {
	t.Helper()
	RequireRoot(t)
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
// with losetup's flags (see Attach), and returns the device path. The
// device is detached when the test ends, or when its process dies.
func AttachFile(t testing.TB, img string, flags ...string) string {
	t.Helper()
	RequireRoot(t)
	cfg, err := loopConfig(flags)
	if err != nil {
		t.Fatalf("attaching %s: %v", img, err)
	}
	if img, err = filepath.Abs(img); err != nil {
		t.Fatal(err)
	}
	dev, fd, err := attach(img, cfg)
	if err != nil {
		t.Fatalf("attaching %s: %v", img, err)
	}
	t.Cleanup(func() {
		// The device goes when its last user does: this file, a mount,
		// a partition a program still holds for a moment.
		if err := unix.Close(fd); err != nil {
			t.Errorf("closing %s: %v", dev, err)
		}
		if err := waitDetached(dev, img, 5*time.Second); err != nil {
			t.Error(err)
		}
	})
	return dev
}

// loopConfig turns losetup's flags into the kernel's loop configuration;
// AUTOCLEAR is always set.
func loopConfig(flags []string) (unix.LoopConfig, error) {
	cfg := unix.LoopConfig{Info: unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}}
	for i := 0; i < len(flags); i++ {
		switch f := flags[i]; f {
		case "--partscan", "-P":
			cfg.Info.Flags |= unix.LO_FLAGS_PARTSCAN
		case "--read-only", "-r":
			cfg.Info.Flags |= unix.LO_FLAGS_READ_ONLY
		case "--direct-io", "--direct-io=on":
			cfg.Info.Flags |= unix.LO_FLAGS_DIRECT_IO
		case "--sector-size", "-b":
			if i+1 == len(flags) {
				return cfg, fmt.Errorf("losetup flag %s without a size", f)
			}
			i++
			n, err := strconv.ParseUint(flags[i], 10, 32)
			if err != nil || n < 512 || n > 4096 || n&(n-1) != 0 {
				return cfg, fmt.Errorf("losetup flag %s %q: not a sector size (512 to 4096, a power of two)", f, flags[i])
			}
			cfg.Size = uint32(n)
		default:
			return cfg, fmt.Errorf("losetup flag %q is not one looptest knows (--partscan, --sector-size N, --read-only, --direct-io)", f)
		}
	}
	return cfg, nil
}

// attach configures a free loop device over img and returns its path and
// an open file descriptor of it, which keeps it attached.
func attach(img string, cfg unix.LoopConfig) (string, int, error) {
	mode := unix.O_RDWR
	if cfg.Info.Flags&unix.LO_FLAGS_READ_ONLY != 0 {
		mode = unix.O_RDONLY
	}
	backing, err := unix.Open(img, mode|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", -1, fmt.Errorf("opening the image: %w", err)
	}
	defer unix.Close(backing)
	cfg.Fd = uint32(backing)
	copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], img)
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", -1, fmt.Errorf("opening /dev/loop-control (is the loop module loaded?): %w", err)
	}
	defer unix.Close(ctl)
	// Other test binaries attach loop devices concurrently: a free one
	// may be taken between GET_FREE and CONFIGURE (EBUSY); take another.
	for try := 0; ; try++ {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", -1, fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		fd, err := openLoop(dev, mode)
		if err != nil {
			return "", -1, err
		}
		err = unix.IoctlLoopConfigure(fd, &cfg)
		if err == nil {
			return dev, fd, nil
		}
		unix.Close(fd)
		if !errors.Is(err, unix.EBUSY) || try == 20 {
			return "", -1, fmt.Errorf("LOOP_CONFIGURE of %s: %w", dev, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openLoop opens a loop device node, waiting a moment for udev (or
// devtmpfs) to make it after LOOP_CTL_GET_FREE added it.
func openLoop(dev string, mode int) (int, error) {
	for i := 0; ; i++ {
		fd, err := unix.Open(dev, mode|unix.O_CLOEXEC, 0)
		if err == nil || !errors.Is(err, unix.ENOENT) || i == 50 {
			if err != nil {
				return -1, fmt.Errorf("opening %s: %w", dev, err)
			}
			return fd, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BackingFile is the file loop device dev is attached to, "" when it is
// not attached.
func BackingFile(dev string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// waitDetached waits for dev to be detached from img (another test may
// attach the device again at once).
func waitDetached(dev, img string, max time.Duration) error {
	deadline := time.Now().Add(max)
	for BackingFile(dev) == img {
		if time.Now().After(deadline) {
			holders, _ := filepath.Glob(filepath.Join("/sys/block", filepath.Base(dev), "holders", "*"))
			return fmt.Errorf("%s is still attached %v after the test closed it (mounted, or held by %v?)", dev, max, holders)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
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
