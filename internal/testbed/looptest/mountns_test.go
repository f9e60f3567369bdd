package looptest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// killHelperEnv names the directory of TestKilledTestsLeaveNothing's
// child, which runs killHelper instead of the tests.
const killHelperEnv = "LOOPTEST_KILL_HELPER"

func TestMain(m *testing.M) {
	Main(func() int {
		if dir := os.Getenv(killHelperEnv); dir != "" {
			return killHelper(dir)
		}
		if dir := os.Getenv(leakHelperEnv); dir != "" {
			return leakHelper(dir)
		}
		return m.Run()
	})
}

// leakHelperEnv names the directory of TestLeaksFail's child, which runs
// leakHelper instead of the tests.
const leakHelperEnv = "LOOPTEST_LEAK_HELPER"

// leakHelper passes, but leaves what a careless test would: a mount on
// dir/mnt, a running sleep, a link in its network namespace and a loop
// device attached without autoclear over a file it then deletes. It
// writes the device's name to dir/loop.
func leakHelper(dir string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "leak helper: %v\n", err)
		return 3
	}
	if err := unix.Mount("leaktest", filepath.Join(dir, "mnt"), "tmpfs", 0, ""); err != nil {
		return fail(err)
	}
	if err := exec.Command("sleep", "600").Start(); err != nil {
		return fail(err)
	}
	if out, err := exec.Command("ip", "link", "add", "leaktest0", "type", "veth", "peer", "name", "leaktest1").CombinedOutput(); err != nil {
		return fail(fmt.Errorf("ip link add: %v: %s", err, out))
	}
	img := filepath.Join(dir, "leak.img")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o644); err != nil {
		return fail(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		return fail(fmt.Errorf("losetup: %v: %s", err, out))
	}
	if err := os.WriteFile(filepath.Join(dir, "loop"), out, 0o644); err != nil {
		return fail(err)
	}
	if err := os.Remove(img); err != nil {
		return fail(err)
	}
	return 0
}

// Tests that pass but leave a mount, a process, a link or a loop device
// behind fail the package, with each named; the process is killed. The
// helper runs in a network namespace of its own, so its link is not the
// host's.
func TestLeaksFail(t *testing.T) {
	RequireRoot(t, "losetup", "ip", "sleep")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "mnt"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "loop")); err == nil {
			Run(t, "losetup", "-d", strings.TrimSpace(string(b)))
		}
	})
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, mountNSEnv+"=") {
			env = append(env, e)
		}
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(env, leakHelperEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("the leaking tests ended with %v, want exit status 1:\n%s", err, out)
	}
	loop, err := os.ReadFile(filepath.Join(dir, "loop"))
	if err != nil {
		t.Fatalf("the helper named no loop device: %v\n%s", err, out)
	}
	for _, want := range []string{
		"mount " + filepath.Join(dir, "mnt") + " tmpfs leaktest: appeared",
		"process ", "(sleep): still running", "sleep 600",
		"link leaktest0: appeared",
		"loop " + strings.TrimSpace(string(loop)) + ": appeared",
		"no autoclear, and its backing file is deleted",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if mounted(t, "self", filepath.Join(dir, "mnt")) {
		t.Errorf("the helper's mount is here")
	}
	for _, p := range descendants(1) {
		if p.cmdline == "sleep 600" && p.ppid == os.Getpid() {
			t.Errorf("the helper's sleep (%d) was not killed", p.pid)
		}
	}
}

// killHelper does what a mounting test does: it attaches dir/disk.img as
// a loop device, makes ext4 on it and mounts it on dir/mnt; then it writes
// its PID and the device to dir/state and waits to be killed.
func killHelper(dir string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "kill helper: %v\n", err)
		return 1
	}
	dev, _, err := attach(filepath.Join(dir, "disk.img"), unix.LoopConfig{Info: unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}})
	if err != nil {
		return fail(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", dev).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("mkfs.ext4 %s: %v: %s", dev, err, out))
	}
	if err := unix.Mount(dev, filepath.Join(dir, "mnt"), "ext4", 0, ""); err != nil {
		return fail(fmt.Errorf("mounting %s: %w", dev, err))
	}
	state := fmt.Sprintf("%d %s\n", os.Getpid(), dev)
	if err := os.WriteFile(filepath.Join(dir, "state.tmp"), []byte(state), 0o644); err != nil {
		return fail(err)
	}
	if err := os.Rename(filepath.Join(dir, "state.tmp"), filepath.Join(dir, "state")); err != nil {
		return fail(err)
	}
	time.Sleep(10 * time.Minute)
	return fail(fmt.Errorf("not killed"))
}

// mounted says whether the mount table of process pid ("self", "1") has
// a mount on dir.
func mounted(t *testing.T, pid, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// alive says whether process pid exists and is not a zombie.
func alive(pid int) bool {
	for _, p := range descendants(1) {
		if p.pid == pid {
			return true
		}
	}
	return false
}

// A test binary killed with SIGKILL (as go test's -timeout ends a hung
// one, with no t.Cleanup run) leaves no mount and no loop device: its
// mounts were in its private mount namespace, which dies with it, and
// the loop device, attached with AUTOCLEAR, goes with the last mount and
// file using it. Killed is the copy running the tests, or the process go
// test started, whose death kills the copy.
func TestKilledTestsLeaveNothing(t *testing.T) {
	RequireRoot(t, "mkfs.ext4")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, victim := range []string{"tests", "started"} {
		t.Run(victim, func(t *testing.T) {
			dir := t.TempDir()
			img := filepath.Join(dir, "disk.img")
			if err := os.WriteFile(img, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(img, 32<<20); err != nil {
				t.Fatal(err)
			}
			mnt := filepath.Join(dir, "mnt")
			if err := os.Mkdir(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			var env []string
			for _, e := range os.Environ() {
				if !strings.HasPrefix(e, mountNSEnv+"=") {
					env = append(env, e)
				}
			}
			cmd := exec.Command(self, "-test.run=^$")
			cmd.Env = append(env, killHelperEnv+"="+dir)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			var state []byte
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
				if state, err = os.ReadFile(filepath.Join(dir, "state")); err == nil {
					break
				}
				select {
				case err := <-exited:
					t.Fatalf("the helper ended before mounting: %v\n%s", err, out.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("the helper did not mount within a minute:\n%s", out.String())
				}
			}
			var pid int
			var dev string
			if _, err := fmt.Sscan(string(state), &pid, &dev); err != nil {
				t.Fatalf("state %q: %v", state, err)
			}
			if pid == cmd.Process.Pid {
				t.Fatalf("the tests ran in the process go test started (%d), not in a copy", pid)
			}
			// While it runs, the mount is the copy's only.
			if !mounted(t, strconv.Itoa(pid), mnt) {
				t.Fatalf("%s is not mounted in the helper's namespace", mnt)
			}
			if mounted(t, "1", mnt) || mounted(t, "self", mnt) {
				t.Errorf("%s is mounted outside the helper's namespace", mnt)
			}
			if got := BackingFile(dev); got != img {
				t.Fatalf("%s is attached to %q, want %s", dev, got, img)
			}

			if victim == "tests" {
				err = syscall.Kill(pid, syscall.SIGKILL)
			} else {
				err = cmd.Process.Signal(syscall.SIGKILL)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := <-exited; err == nil {
				t.Errorf("the helper exited 0 after SIGKILL")
			}
			exited <- nil // for the cleanup
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				// A dead copy whose parent died first is a zombie of
				// the subreaper that runs this test until it is reaped.
				if !alive(pid) && BackingFile(dev) != img {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("10 s after SIGKILL: the copy (PID %d) is alive: %v; %s attached to %q", pid, alive(pid), dev, BackingFile(dev))
				}
			}
			if mounted(t, "1", mnt) || mounted(t, "self", mnt) {
				t.Errorf("%s is still mounted", mnt)
			}
		})
	}
}
