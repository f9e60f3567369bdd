package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent"
	ironicclient "github.com/ironic-go/ironic-agent/agent/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/lifecycle"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

// agentOpts say how one agent process runs.
type agentOpts struct {
	// MAC is the address of the machine's one NIC (eth0 of the fixture
	// tree the agent reads as its machine); lookup and inspection use it.
	MAC string
	// Devices are the only block devices the agent may touch
	// (--allowed-devices); the test's loop devices.
	Devices []string
	// Port is the API port; 0 picks a free one from the e2e range.
	Port int
	// InspectionURL enables inspection against this callback URL.
	InspectionURL string
	// StepsDir is the executable-steps directory ("" = an empty one).
	StepsDir string
	// StateDir is where the agent keeps this boot's token and certificate
	// for a restart ("" = a new one per agent; two agents of one test share
	// it by passing the same).
	StateDir string
	// APIURL is the Ironic the agent talks to ("" = the suite's).
	APIURL string
	// Extra flags, appended last.
	Extra []string
}

// agentProc is one running agent.
type agentProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	logPath string
	port    int
	done    chan struct{}
	err     error
	once    sync.Once
}

// startAgent runs the agent binary against the suite's Ironic. Safety:
//   - it reads its machine from a copy of a fixture tree whose NIC carries
//     opts.MAC, so lookup and inspection see test MACs, never this host's;
//   - it may touch only opts.Devices (--allowed-devices), the test's loop
//     devices;
//   - it runs as PID 1 of a new PID namespace, so a power_off or reboot
//     command (reboot(2)) ends only that namespace, never this machine.
func (s *suite) startAgent(t *testing.T, opts agentOpts) *agentProc {
	t.Helper()
	if opts.Port == 0 {
		opts.Port = freePort(t)
	}
	root := s.machineRoot(t, opts.MAC)
	steps := opts.StepsDir
	if steps == "" {
		steps = filepath.Join(t.TempDir(), "steps.d")
	}
	state := opts.StateDir
	if state == "" {
		state = filepath.Join(t.TempDir(), "state")
	}
	apiURL := opts.APIURL
	if apiURL == "" {
		apiURL = s.services.IronicURL
	}
	args := []string{"run",
		"--kernel-cmdline", "",
		"--api-url", apiURL,
		"--listen-host", "127.0.0.1",
		"--listen-port", fmt.Sprint(opts.Port),
		"--advertise-host", "127.0.0.1",
		"--advertise-port", fmt.Sprint(opts.Port),
		"--inventory-root", root,
		"--steps-dir", steps,
		"--state-dir", state,
		"--lookup-timeout", "600",
		"--inspection-dhcp-wait-timeout", "0",
		"--debug",
	}
	if len(opts.Devices) > 0 {
		args = append(args, "--allowed-devices", strings.Join(opts.Devices, ","))
	}
	if opts.InspectionURL != "" {
		args = append(args, "--inspection-callback-url", opts.InspectionURL)
	}
	args = append(args, opts.Extra...)
	return s.runAgent(t, opts.Port, args)
}

func (s *suite) runAgent(t *testing.T, port int, args []string) *agentProc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), fmt.Sprintf("agent-%d-%d.log", port, time.Now().UnixNano()))
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "==== %s %s\n", s.agentBin, strings.Join(args, " "))
	cmd := exec.Command(s.agentBin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting the agent: %v", err)
	}
	a := &agentProc{t: t, cmd: cmd, logPath: logPath, port: port, done: make(chan struct{})}
	go func() {
		a.err = cmd.Wait()
		f.Close()
		close(a.done)
	}()
	if err := checkOwnPIDNamespace(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		<-a.done
		t.Fatalf("refusing to run the agent outside its own PID namespace: %v", err)
	}
	t.Cleanup(func() {
		a.Stop()
		log := a.Log()
		if strings.Contains(log, "WARNING: DATA RACE") {
			t.Errorf("the race detector found a data race in the agent")
		}
		if t.Failed() {
			t.Logf("agent log %s:\n%s", logPath, log)
		}
	})
	return a
}

// checkOwnPIDNamespace makes sure the agent is PID 1 of a namespace of its
// own (/proc/PID/status NSpid lists the PID in each nested namespace), the
// guarantee that its power_off cannot power off this machine.
func checkOwnPIDNamespace(pid int) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "NSpid:" {
			if len(f) == 3 && f[2] == "1" {
				return nil
			}
			return fmt.Errorf("/proc/%d/status %s", pid, line)
		}
	}
	return fmt.Errorf("/proc/%d/status has no NSpid line", pid)
}

// driver is the test bed's lifecycle driver for node on c with fake
// power: once Ironic waits for a ramdisk it boots one, the agent started
// with opts (each boot a new process, as a new boot of the machine).
func (s *suite) driver(t *testing.T, c *ironic.Client, node string, opts agentOpts) *lifecycle.Driver[*agentProc] {
	return &lifecycle.Driver[*agentProc]{T: t, Ctx: t.Context(), Ironic: c, Node: node,
		Boot: func() (*agentProc, error) { return s.startAgent(t, opts), nil }}
}

// Done is closed once the agent has ended.
func (a *agentProc) Done() <-chan struct{} { return a.done }

// Stop ends the agent with SIGTERM (SIGKILL after 10 s) and waits for it.
func (a *agentProc) Stop() {
	a.once.Do(func() {
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.done:
		case <-time.After(10 * time.Second):
			_ = a.cmd.Process.Kill()
			<-a.done
		}
	})
}

// Kill ends the agent with SIGKILL, as a crash or a power-off would, and
// waits for it. A first lookup on the wire is answered first (at most 10
// s): Ironic would still answer it after a power-off, and with fake power
// the next operation starts at once, so an answer landing in it (the
// inspection agent's lookup arriving during the cleaning that follows)
// would give the dead agent the node's token and leave the next agent
// without one.
func (a *agentProc) Kill() {
	a.once.Do(func() {
		a.awaitLookupAnswer(10 * time.Second)
		_ = a.cmd.Process.Kill()
		<-a.done
	})
}

// awaitLookupAnswer waits, up to limit, while the agent's log shows a
// lookup started and neither answered nor retried.
func (a *agentProc) awaitLookupAnswer(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		log := a.Log()
		started := strings.Count(log, logtext.Msg(agent.EventLookingUp))
		answered := strings.Count(log, logtext.Msg(agent.EventLookupSucceeded)) + strings.Count(log, logtext.Msg(ironicclient.EventLookupRetrying))
		if started <= answered {
			return
		}
		select {
		case <-a.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Exited reports whether the agent has ended, and how.
func (a *agentProc) Exited() (bool, error) {
	select {
	case <-a.done:
		return true, a.err
	default:
		return false, nil
	}
}

// Log returns the agent's output so far (the last 256 KiB).
func (a *agentProc) Log() string {
	b, err := os.ReadFile(a.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 256<<10 {
		b = b[len(b)-256<<10:]
	}
	return string(b)
}

// WaitLog waits until the agent's log contains substr.
func (a *agentProc) WaitLog(ctx context.Context, substr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if strings.Contains(a.Log(), substr) {
			return nil
		}
		if dead, err := a.Exited(); dead {
			return fmt.Errorf("agent exited (%v) before logging %q", err, substr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent did not log %q within %s", substr, timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// freePort returns a port of the e2e range (9200-9289) nobody listens on.
// Tests run one at a time, and each agent gets a new port so Ironic's
// stored callback URL of an earlier node never matches by accident.
func freePort(t *testing.T) int {
	t.Helper()
	s := theSuite
	s.portMu.Lock()
	defer s.portMu.Unlock()
	for range 90 {
		p := 9200 + s.nextPort%90
		s.nextPort++
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			l.Close()
			return p
		}
	}
	t.Fatal("no free port in 9200-9289")
	return 0
}

// machineRoot copies the fixture tree of the CI machine and gives its one
// NIC (eth0) the address mac: sysfs's address and the recorded permanent
// address, which the collector prefers.
func (s *suite) machineRoot(t *testing.T, mac string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", s.fixtureRoot, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v: %s", s.fixtureRoot, dst, err, out)
	}
	if mac == "" {
		return dst
	}
	addr, err := filepath.EvalSymlinks(filepath.Join(dst, "sys/class/net/eth0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(addr, "address"), []byte(mac+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	netJSON := filepath.Join(dst, "run/ironic-agent-capture/net.json")
	b, err := os.ReadFile(netJSON)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]map[string]map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", netJSON, err)
	}
	eth0, ok := rec["interfaces"]["eth0"]
	if !ok {
		t.Fatalf("%s: no eth0", netJSON)
	}
	eth0["perm_address"] = mac
	b, _ = json.Marshal(rec)
	if err := os.WriteFile(netJSON, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// loopDevice attaches a sparse file of size bytes as a loop device with
// partition scanning and detaches it when the test ends.
func loopDevice(t *testing.T, size int64) string {
	return looptest.Attach(t, size, "--partscan")
}
