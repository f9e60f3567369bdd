package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent/api"
	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/agent/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/fakeironic"
	"github.com/ironic-go/ironic-agent/inventory"
)

// This file replays Ironic 21.4: a fake Ironic API (fakeironic) answers
// lookup and heartbeat with the responses recorded from Debian's ironic
// 21.4.4, and its conductor drives the agent's REST API the way 21.4's
// agent_base.py does after each heartbeat.

const testMAC = "52:54:a9:7e:01:01"

// The node and agent token of the recorded lookup.
const (
	recordedNode  = "ff890ff6-6023-4f5f-9d87-4a3f87f7e551"
	recordedToken = "tiFtwpghhKF8HV0FrSMOh3aAsw31mpadirCo2f7hKu0"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := fakeironic.Recorded(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newIronic serves Ironic 21.4's API for the recorded node on loopback,
// as Ironic does: the token masked after the first lookup, a heartbeat
// timeout of 2 s so the tests move fast; with cleaning, a conductor doing
// automated cleaning behind it. It returns the API's URL.
func newIronic(t testing.TB, cleaning bool) (*fakeironic.Server, *fakeironic.Cleaning, string) {
	t.Helper()
	s := &fakeironic.Server{NodeUUID: recordedNode, Token: recordedToken, MaskToken: true, HeartbeatTimeout: 2}
	var c *fakeironic.Cleaning
	if cleaning {
		var err error
		if c, err = fakeironic.NewCleaning(s); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, c, srv.URL
}

// testManager is a hardware manager registered at build time, as a
// downstream build would, with two clean steps; one can be made to fail.
type testManager struct {
	mu       sync.Mutex
	ran      []string
	failStep string
	delay    time.Duration
}

func (m *testManager) Name() string      { return "test_hardware_manager" }
func (m *testManager) ClassName() string { return "TestHardwareManager" }
func (m *testManager) Version() string   { return "1.0" }
func (m *testManager) EvaluateHardwareSupport(context.Context) hwmgr.Support {
	return hwmgr.SupportMainline
}

func (m *testManager) CleanSteps(context.Context, map[string]any, []any) ([]hwmgr.Step, error) {
	t := true
	return []hwmgr.Step{
		{Step: "erase_devices_metadata", Priority: 99, Interface: "deploy", Abortable: &t},
		{Step: "test_step", Priority: 10, Interface: "deploy", Abortable: &t},
		{Step: "manual_only", Priority: 0, Interface: "deploy", Abortable: &t},
	}, nil
}

func (m *testManager) DeploySteps(context.Context, map[string]any, []any) ([]hwmgr.Step, error) {
	return nil, nil
}

func (m *testManager) ExecuteStep(ctx context.Context, step string, req hwmgr.Request) (any, error) {
	switch step {
	case "erase_devices_metadata", "test_step", "manual_only":
	default:
		return nil, hwmgr.ErrNoSuchMethod
	}
	time.Sleep(m.delay)
	m.mu.Lock()
	m.ran = append(m.ran, step)
	m.mu.Unlock()
	if step == m.failStep {
		return nil, fmt.Errorf("/dev/loop7: wipe failed: device busy")
	}
	return map[string]any{"done": step}, nil
}

func (m *testManager) steps() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.ran...)
}

type fakeMachine struct {
	mu      sync.Mutex
	actions []string
}

func (f *fakeMachine) record(s string) error {
	f.mu.Lock()
	f.actions = append(f.actions, s)
	f.mu.Unlock()
	return nil
}
func (f *fakeMachine) PowerOff() error                   { return f.record("poweroff") }
func (f *fakeMachine) Reboot() error                     { return f.record("reboot") }
func (f *fakeMachine) Sync() error                       { return f.record("sync") }
func (f *fakeMachine) FlushBlockDevice(dev string) error { return f.record("flush " + dev) }
func (f *fakeMachine) StepClock(d time.Duration) error   { return f.record("step-clock " + d.String()) }
func (f *fakeMachine) WriteRTC(context.Context) error    { return f.record("rtc") }

func testInventory(context.Context) (*inventory.Inventory, error) {
	return &inventory.Inventory{
		Interfaces: []inventory.Interface{{Name: "eth0", MACAddress: testMAC}},
		Disks:      []inventory.Disk{},
		CPU:        inventory.CPU{Flags: []string{}},
		Boot:       inventory.Boot{CurrentBootMode: "bios"},
		Hostname:   "test",
	}, nil
}

// syncBuffer is a goroutine-safe log buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type runningAgent struct {
	agent *Agent
	url   string
	log   *syncBuffer
	done  chan error
	stop  func()
}

// startAgent runs an agent against apiURL on a loopback port.
func startAgent(t *testing.T, flags map[string]string, opts Options) *runningAgent {
	t.Helper()
	ln := opts.Hooks.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	port := ln.Addr().(*net.TCPAddr).Port
	// No test writes the host's NVRAM: on a UEFI machine a test that
	// wants boot entries gets a directory of its own.
	if opts.EFIVars == "" {
		opts.EFIVars = filepath.Join(t.TempDir(), "no-efivars")
	}
	all := map[string]string{"advertise_host": "127.0.0.1", "advertise_port": strconv.Itoa(port),
		"lookup_timeout": "20", "steps_dir": t.TempDir(), "state_dir": t.TempDir(),
		"disk_wait_attempts": "0"}
	for k, v := range flags {
		all[k] = v
	}
	cfg, err := config.Load(config.Inputs{Flags: all})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	ring := NewLogRing(1 << 20)
	opts.Config = cfg
	opts.Log = slog.New(slog.NewTextHandler(io.MultiWriter(logs, ring), &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.LogRing = ring
	// The host's md arrays and multipath maps are not the test's.
	opts.SkipRAIDAssembly, opts.DisableMultipath = true, true
	opts.Hooks.Listener = ln
	if opts.Hooks.Inventory == nil {
		opts.Hooks.Inventory = testInventory
	}
	if opts.Hooks.Machine == nil {
		opts.Hooks.Machine = &fakeMachine{}
	}
	if opts.StateRoot == "" {
		opts.StateRoot = t.TempDir()
	}
	ready := make(chan string, 1)
	opts.Hooks.Ready = func(u string) { ready <- u }
	ctx, cancel := context.WithCancel(context.Background())
	a, err := New(ctx, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ra := &runningAgent{agent: a, log: logs, done: make(chan error, 1)}
	go func() { ra.done <- a.Run(ctx) }()
	var once sync.Once
	ra.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-ra.done:
			case <-time.After(20 * time.Second):
				t.Errorf("agent did not stop")
			}
		})
	}
	t.Cleanup(func() {
		ra.stop()
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	select {
	case ra.url = <-ready:
	case err := <-ra.done:
		t.Fatalf("agent stopped before serving: %v\n%s", err, logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("agent not ready\n%s", logs.String())
	}
	return ra
}

func waitState(t *testing.T, c *fakeironic.Cleaning, want ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	st, le, err := c.WaitState(ctx, want...)
	if err != nil {
		t.Fatal(err)
	}
	return st, le
}

func TestIronic214AutomatedCleaning(t *testing.T) {
	f, c, url := newIronic(t, true)
	mgr := &testManager{delay: 200 * time.Millisecond}
	startAgent(t, map[string]string{"api_url": url}, Options{Managers: []func() hwmgr.Manager{func() hwmgr.Manager { return mgr }}})
	if st, le := waitState(t, c, fakeironic.StateAvailable, fakeironic.StateCleanFailed); st != fakeironic.StateAvailable {
		t.Fatalf("state %s, last_error %s", st, le)
	}
	if got := strings.Join(mgr.steps(), ","); got != "erase_devices_metadata,test_step" {
		t.Errorf("steps run: %s", got)
	}

	reqs := f.Requests()
	if reqs[0].Method != "GET" || reqs[0].URI != "/" {
		t.Errorf("first request %s %s, want GET / (version discovery)", reqs[0].Method, reqs[0].URI)
	}
	if reqs[1].URI != "/v1/lookup?addresses=52%3A54%3Aa9%3A7e%3A01%3A01" || reqs[1].Version != "1.62" {
		t.Errorf("lookup: %s at %q", reqs[1].URI, reqs[1].Version)
	}
	hb := 0
	for _, r := range reqs[2:] {
		if r.Method != "POST" || r.URI != "/v1/heartbeat/"+recordedNode {
			t.Errorf("unexpected request %s %s", r.Method, r.URI)
			continue
		}
		hb++
		if r.Version != "1.68" {
			t.Errorf("heartbeat at %q, want 1.68", r.Version)
		}
		var body map[string]any
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("heartbeat body %s: %v", r.Body, err)
		}
		if keys := slices.Sorted(maps.Keys(body)); strings.Join(keys, ",") != "agent_token,agent_verify_ca,agent_version,callback_url" {
			t.Errorf("heartbeat body keys %v", keys)
		}
		if body["agent_token"] != recordedToken {
			t.Errorf("heartbeat token %v", body["agent_token"])
		}
		if cb, _ := body["callback_url"].(string); !strings.HasPrefix(cb, "https://127.0.0.1:") {
			t.Errorf("callback_url %s: want https (auto TLS at 1.68)", cb)
		}
	}
	if hb < 3 {
		t.Errorf("%d heartbeats, want at least 3", hb)
	}
	if calls := strings.Join(c.AgentCalls(), "; "); !strings.HasPrefix(calls, "POST clean.get_clean_steps; POST clean.execute_clean_step; GET commands") {
		t.Errorf("conductor calls: %s", calls)
	}
}

func TestIronic214CleanFailure(t *testing.T) {
	_, c, url := newIronic(t, true)
	mgr := &testManager{failStep: "test_step"}
	startAgent(t, map[string]string{"api_url": url}, Options{Managers: []func() hwmgr.Manager{func() hwmgr.Manager { return mgr }}})
	st, le := waitState(t, c, fakeironic.StateAvailable, fakeironic.StateCleanFailed)
	if st != fakeironic.StateCleanFailed {
		t.Fatalf("state %s", st)
	}
	if !strings.Contains(le, "Clean step deploy.test_step failed") || !strings.Contains(le, "/dev/loop7: wipe failed: device busy") {
		t.Errorf("last_error %q does not carry the agent's error", le)
	}
	if c.SystemLogs() == "" {
		t.Errorf("no system logs collected after the failure")
	}
}

func TestLookupMaskedTokenKeepsToken(t *testing.T) {
	a := &Agent{tokens: &api.Tokens{}, log: slog.New(slog.DiscardHandler), cfg: &config.Config{StateDir: t.TempDir()}}
	var first, masked struct {
		Node   map[string]any `json:"node"`
		Config map[string]any `json:"config"`
	}
	_ = json.Unmarshal(readTestdata(t, "lookup.json"), &first)
	_ = json.Unmarshal(readTestdata(t, "lookup-masked.json"), &masked)
	for _, doc := range []any{first, masked} {
		b, _ := json.Marshal(doc)
		res, err := ironic.ParseLookup(b, "test")
		if err != nil {
			t.Fatal(err)
		}
		a.processLookup(res)
	}
	if got := a.tokens.Token(); got != recordedToken {
		t.Fatalf("token after masked lookup = %q", got)
	}
}

// Ironic's API goes away while a step runs: the agent keeps heartbeating
// (5-10 s after each failure) and cleaning completes once it is back.
func TestIronicDownDuringCleaning(t *testing.T) {
	f, c, url := newIronic(t, true)
	mgr := &testManager{delay: 500 * time.Millisecond}
	startAgent(t, map[string]string{"api_url": url}, Options{Managers: []func() hwmgr.Manager{func() hwmgr.Manager { return mgr }}})
	deadline := time.Now().Add(30 * time.Second)
	for len(mgr.steps()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f.SetDown(true)
	refused := func() int {
		n := 0
		for _, r := range f.Requests() {
			if r.Status == http.StatusServiceUnavailable {
				n++
			}
		}
		return n
	}
	for refused() < 2 && time.Now().Before(deadline.Add(30*time.Second)) {
		time.Sleep(50 * time.Millisecond)
	}
	f.SetDown(false)
	if st, le := waitState(t, c, fakeironic.StateAvailable, fakeironic.StateCleanFailed); st != fakeironic.StateAvailable {
		t.Fatalf("state %s: %s", st, le)
	}
	if n := refused(); n < 2 {
		t.Errorf("only %d heartbeats while Ironic was down", n)
	}
	if got := strings.Join(mgr.steps(), ","); got != "erase_devices_metadata,test_step" {
		t.Errorf("steps %s", got)
	}
}

// An agent process restarted in the middle of cleaning (same boot, same
// address) carries on: the masked token of the second lookup is replaced by
// the one the first process kept, the auto-TLS certificate is the same, so
// Ironic accepts its heartbeats and the cleaning completes.
func TestAgentRestartMidCleaning(t *testing.T) {
	f, c, url := newIronic(t, true)
	state := t.TempDir()
	slow := &testManager{delay: 3 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	first := startAgent(t, map[string]string{"api_url": url, "state_dir": state}, Options{Hooks: Hooks{Listener: ln},
		Managers: []func() hwmgr.Manager{func() hwmgr.Manager { return slow }}})
	deadline := time.Now().Add(30 * time.Second)
	for !c.Running() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	first.stop()
	firstCA := c.VerifyCA()

	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fast := &testManager{}
	startAgent(t, map[string]string{"api_url": url, "state_dir": state}, Options{Hooks: Hooks{Listener: ln2},
		Managers: []func() hwmgr.Manager{func() hwmgr.Manager { return fast }}})
	if st, le := waitState(t, c, fakeironic.StateAvailable, fakeironic.StateCleanFailed); st != fakeironic.StateAvailable {
		t.Fatalf("state %s: %s", st, le)
	}
	if ca := c.VerifyCA(); ca != firstCA || ca == "" {
		t.Errorf("the restarted agent sent a different agent_verify_ca")
	}
	if got := strings.Join(fast.steps(), ","); got != "test_step" {
		t.Errorf("steps after the restart: %s", got)
	}
	if n := len(f.Lookups()); n != 2 {
		t.Errorf("%d lookups, want 2 (the second one answered with the mask)", n)
	}
}
