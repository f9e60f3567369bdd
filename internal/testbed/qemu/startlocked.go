package qemu

import (
	"os/exec"
	"runtime"
)

// StartLocked starts cmd from an OS thread that stays alive, locked to one
// goroutine, until cmd exits, and returns that exit's cmd.Wait result on
// the channel. Linux sends the Pdeathsig of a child when the thread that
// forked it exits, not the process (prctl(2) PR_SET_PDEATHSIG), and the Go
// runtime ends a thread whose goroutine exits locked to it, as
// netnstest.Do's does when it cannot switch its thread back. Started from
// any pooled thread, QEMU was SIGKILLed the moment a Do that ended its
// thread (a test dialing into its network namespace) happened to run on
// the thread that had forked it: the guest vanished right after answering
// the TCP handshake.
func StartLocked(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}
