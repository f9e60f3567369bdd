package looptest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// mountNSEnv marks the copy of the test binary that Main runs in the
// private mount namespace.
const mountNSEnv = "LOOPTEST_PRIVATE_MOUNTS"

// Main runs run (the package's m.Run) and exits with its status. As root
// it first re-executes the test binary in a private mount namespace (its
// own copy of the host's mounts, / made MS_REC|MS_PRIVATE so nothing
// propagates either way) and waits for it: every mount the tests make
// lives in that namespace only and vanishes with it, however the tests
// end, a -timeout panic or a SIGKILL included; the copy gets SIGKILL when
// this process dies. As another user the tests, which then mount nothing,
// run here.
//
// As root Main also fails the package (exit status 1, naming each) when
// the tests leave something behind: a mount or named network namespace, a
// loop device, a link in the test binary's network namespace, a process.
// It kills leftover processes; the rest stays for the person who reads
// the failure, apart from mounts, which go with the namespace. Use it as
//
//	func TestMain(m *testing.M) { looptest.Main(m.Run) }
func Main(run func() int) {
	if os.Getenv(mountNSEnv) != "" {
		// The copy: / is private already (the runtime remounts it when
		// it unshares the mount namespace); say so again, in case a
		// parent that is not Main started this binary with the mark.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			fmt.Fprintf(os.Stderr, "looptest: making / private in the test's mount namespace: %v\n", err)
			os.Exit(2)
		}
		ctx := context.Background()
		before, err := recordCopy(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "looptest: recording the mounts before the tests: %v\n", err)
			os.Exit(2)
		}
		code := run()
		leaks, err := copyLeaks(ctx, before)
		os.Exit(reportLeaks("in the test binary", leaks, err, code))
	}
	if os.Geteuid() != 0 {
		os.Exit(run())
	}
	os.Exit(reexec())
}

// reexec runs this test binary again, with the same arguments, in a new
// private mount namespace, and returns its exit status, or 1 when the tests
// passed but left something behind.
func reexec() int {
	ctx := context.Background()
	before, err := recordHost(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "looptest: recording the host before the tests: %v\n", err)
		return 2
	}
	code := runCopy()
	leaks, err := hostLeaks(ctx, before)
	return reportLeaks("after the test binary", leaks, err, code)
}

// runCopy runs the copy and returns its exit status.
func runCopy() int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "looptest: finding the test binary to run it in a private mount namespace: %v\n", err)
		return 2
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), mountNSEnv+"=1")
	// Pdeathsig follows the thread that started the child: keep this
	// goroutine on it for the life of the process.
	runtime.LockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	// go test's own timeout sends SIGQUIT (for the goroutine dump) and a
	// terminal sends SIGINT to both; pass them on and wait for the copy.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "looptest: running the tests in a private mount namespace: %v\n", err)
		return 2
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	signal.Stop(sigs)
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			fmt.Fprintf(os.Stderr, "looptest: the tests were killed by %v\n", ws.Signal())
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	fmt.Fprintf(os.Stderr, "looptest: waiting for the tests: %v\n", err)
	return 2
}
