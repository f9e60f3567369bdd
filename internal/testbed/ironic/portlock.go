package ironic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// portLockName is the abstract Unix socket that stands for the host-wide
// lock on TCP port.
func portLockName(port int) string {
	return fmt.Sprintf("@ironic-agent-ironictest-port-%d", port)
}

// lockPort takes the host-wide lock on TCP port for this process, waiting
// while another process (or another Start of this one) holds it, until ctx
// ends. The lock is a listening abstract Unix socket named after the port
// (portLockName): it has no file, so it leaves nothing behind, and the
// kernel drops it when its holder closes it or dies, however it dies. Its
// name is unique in the caller's network namespace only, which is the
// host's for every Start that locks (one in a namespace of its own skips
// the lock).
func lockPort(ctx context.Context, port int) (unlock func(), err error) {
	name := portLockName(port)
	for {
		l, err := net.Listen("unix", name)
		if err == nil {
			return func() { l.Close() }, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("testbed ironic: lock port %d (abstract socket %s): %w", port, name, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("testbed ironic: waiting for the lock on port %d, which another process holds (abstract socket %s): %w", port, name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
