package ironic

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// portLockHolderEnv makes TestPortLockHolder hold the lock on the port it
// names, as the other process of TestPortLockAcrossProcesses.
const portLockHolderEnv = "IRONICTEST_PORT_LOCK_HOLDER"

// TestPortLockHolder is the other process of TestPortLockAcrossProcesses:
// it takes the lock, says so on stdout and holds it until it is killed.
// Run by hand it does nothing.
func TestPortLockHolder(t *testing.T) {
	port, err := strconv.Atoi(os.Getenv(portLockHolderEnv))
	if err != nil {
		t.Skip("the lock holder of TestPortLockAcrossProcesses; not a test of its own")
	}
	if _, err := lockPort(t.Context(), port); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("holding\n")
	<-t.Context().Done()
}

// TestPortLockAcrossProcesses: while another process holds a port's lock,
// lockPort waits (and gives up when its context ends, saying why); once
// that process is killed, the kernel has released the lock and lockPort
// takes it. No file is left behind in the temporary directory.
func TestPortLockAcrossProcesses(t *testing.T) {
	// A port no run of the suite locks: the lock never binds it.
	port := 40000 + os.Getpid()%20000
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	holder := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestPortLockHolder$", "-test.count=1")
	holder.Env = append(os.Environ(), portLockHolderEnv+"="+strconv.Itoa(port))
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "holding\n" {
		t.Fatalf("the holder process did not take the lock: %q %v", line, err)
	}

	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	if unlock, err := lockPort(short, port); err == nil {
		unlock()
		t.Fatal("took the lock while another process held it")
	} else if !strings.Contains(err.Error(), "waiting for the lock on port "+strconv.Itoa(port)) {
		t.Errorf("error while another process holds the lock: %v", err)
	}

	// Killed, not asked: the lock must go with the process.
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	unlock, err := lockPort(ctx, port)
	if err != nil {
		t.Fatalf("lock after its holder was killed: %v", err)
	}
	t.Logf("lock taken %s after its holder was killed", time.Since(start).Round(time.Millisecond))

	// Held here now: a second taker in this process waits too.
	if again, err := lockPort(short, port); err == nil {
		again()
		t.Error("took the lock twice")
	}
	unlock()
	if again, err := lockPort(ctx, port); err != nil {
		t.Errorf("lock after unlock: %v", err)
	} else {
		again()
	}

	left, err := filepath.Glob(filepath.Join(os.TempDir(), "*port-"+strconv.Itoa(port)+"*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("files left behind for the port: %v", left)
	}
}
