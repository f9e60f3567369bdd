package looptest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/testbed/hostguard"
)

// leakGrace is how long a process the tests killed, or a loop device whose
// last user went, may take to be gone before it counts as left behind.
const leakGrace = 5 * time.Second

// The leak check runs in two halves, each recording only what it can
// tell is the package's own while other test binaries run beside it:
//   - the copy, in its private mount namespace, compares its mount table
//     (named network namespaces are nsfs mounts in it) before and after
//     the tests, looks for loop devices it still holds open, and for
//     processes the tests started that still run;
//   - the process go test started, a child subreaper, looks after the copy
//     has exited for processes that escaped it (double forks), for loop
//     devices attached during the run that nothing detaches (no
//     autoclear, their backing file deleted with the test's directory),
//     and for links that appeared in its network namespace.

// copyState is what the copy records before the tests run.
type copyState struct {
	mounts *hostguard.Snapshot
}

func recordCopy(ctx context.Context) (*copyState, error) {
	m, err := hostguard.Take(ctx, hostguard.Options{Checks: []string{hostguard.CheckMounts}})
	if err != nil {
		return nil, err
	}
	return &copyState{mounts: m}, nil
}

// copyLeaks lists what the tests left in the copy.
func copyLeaks(ctx context.Context, before *copyState) ([]string, error) {
	leaks := processLeaks(os.Getpid())
	after, err := hostguard.Take(ctx, hostguard.Options{Checks: []string{hostguard.CheckMounts}})
	if err != nil {
		return leaks, err
	}
	for _, d := range hostguard.Diff(before.mounts, after) {
		if d.Fails && !d.Removed {
			leaks = append(leaks, d.String())
		}
	}
	fds, _ := filepath.Glob("/proc/self/fd/*")
	for _, fd := range fds {
		if dev, err := os.Readlink(fd); err == nil && strings.HasPrefix(dev, "/dev/loop") {
			leaks = append(leaks, fmt.Sprintf("loop %s (over %s): still held open by the tests (fd %s)", dev, BackingFile(dev), filepath.Base(fd)))
		}
	}
	return leaks, nil
}

// hostState is what the process go test started records before it starts
// the copy.
type hostState struct {
	host *hostguard.Snapshot
}

var hostChecks = []string{hostguard.CheckLoops, hostguard.CheckNetwork}

func recordHost(ctx context.Context) (*hostState, error) {
	// Orphans of the copy's processes come to this process, not to PID 1.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("becoming the tests' subreaper: %w", err)
	}
	s, err := hostguard.Take(ctx, hostguard.Options{Checks: hostChecks})
	if err != nil {
		return nil, err
	}
	return &hostState{host: s}, nil
}

// hostLeaks lists what outlived the copy.
func hostLeaks(ctx context.Context, before *hostState) ([]string, error) {
	leaks := processLeaks(os.Getpid())
	candidates := func() (map[string]string, error) {
		after, err := hostguard.Take(ctx, hostguard.Options{Checks: hostChecks})
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, d := range hostguard.Diff(before.host, after) {
			kind, name, _ := strings.Cut(d.Item, " ")
			switch {
			case d.Removed:
			case kind == "link":
				out[d.Item] = d.String()
			case kind == "loop" && leftLoop(name, d.After):
				out[d.Item] = d.String() + ": no autoclear, and its backing file is deleted"
			}
		}
		return out, nil
	}
	first, err := candidates()
	if err != nil || len(first) == 0 {
		return leaks, err
	}
	// Another test binary's link or loop device may be on its way: what
	// is still there a moment later is left behind.
	time.Sleep(time.Second)
	second, err := candidates()
	if err != nil {
		return leaks, err
	}
	for _, k := range slices.Sorted(maps.Keys(first)) {
		if v, ok := second[k]; ok {
			leaks = append(leaks, v)
		}
	}
	return leaks, nil
}

// leftLoop says whether loop device dev, attached over backing (quoted),
// stays attached with no one to detach it: attached without autoclear (as
// losetup does) over a file the test's temporary directory took with it.
// A device with autoclear goes with its last user, which, if it was the
// tests', is gone.
func leftLoop(dev, backing string) bool {
	b, err := strconv.Unquote(backing)
	if err != nil || !strings.HasSuffix(b, " (deleted)") {
		return false
	}
	ac, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "autoclear"))
	return err == nil && strings.TrimSpace(string(ac)) == "0"
}

// processLeaks waits up to leakGrace for the processes below pid to end,
// and names and kills those still running. Zombies are reaped (the
// subreaper's) or ignored (the copy's own unwaited children: harmless).
func processLeaks(pid int) []string {
	var left []proc
	for deadline := time.Now().Add(leakGrace); ; time.Sleep(100 * time.Millisecond) {
		for {
			var ws unix.WaitStatus
			if p, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); err != nil || p <= 0 {
				break
			}
		}
		left = descendants(pid)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	var leaks []string
	for _, p := range left {
		leaks = append(leaks, fmt.Sprintf("process %d (%s): still running %v after the tests: %s", p.pid, p.comm, leakGrace, p.cmdline))
		_ = unix.Kill(p.pid, unix.SIGKILL)
	}
	return leaks
}

// proc is a process found in /proc.
type proc struct {
	pid, ppid     int
	comm, cmdline string
	zombie        bool
}

// descendants lists the living processes below pid.
func descendants(pid int) []proc {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]proc{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		line := string(b)
		open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(line[end+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		children[ppid] = append(children[ppid], proc{
			pid: n, ppid: ppid, comm: line[open+1 : end], zombie: f[0] == "Z",
			cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")),
		})
	}
	var out []proc
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			queue = append(queue, c.pid)
			if !c.zombie {
				out = append(out, c)
			}
		}
	}
	return out
}

// reportLeaks prints what the tests left behind, if anything, and returns
// the exit status: code, or 1 when code is 0 and something leaked.
func reportLeaks(where string, leaks []string, err error, code int) int {
	if err != nil {
		fmt.Fprintf(os.Stderr, "looptest: checking for leftovers %s: %v\n", where, err)
		if code == 0 {
			code = 2
		}
	}
	if len(leaks) == 0 {
		return code
	}
	fmt.Fprintf(os.Stderr, "looptest: FAIL: the tests left behind (%s; each test must remove what it made):\n", where)
	for _, l := range leaks {
		fmt.Fprintf(os.Stderr, "  %s\n", l)
	}
	if code == 0 {
		code = 1
	}
	return code
}
