package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent/api"
	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/agent/ironic"
	"github.com/ironic-go/ironic-agent/inventory"
)

// This file replays Ironic 21.4: a fake Ironic API answers lookup and
// heartbeat with the responses recorded from Debian's ironic 21.4.4
// (testdata/ironic-21.4), and a fake conductor drives the agent's REST API
// the way 21.4's agent_base.py does after each heartbeat.

const testMAC = "52:54:a9:7e:01:01"

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/ironic-21.4/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
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

// request is what the fake Ironic API saw.
type request struct {
	method, path, version string
	body                  map[string]any
}

// fakeIronic is Ironic 21.4's API plus a conductor doing automated cleaning.
type fakeIronic struct {
	t      testing.TB
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []request
	token  string
	issued bool
	// agent side
	agentURL string
	verifyCA string
	client   *http.Client
	// conductor state
	cmu        sync.Mutex
	state      string
	steps      []map[string]any
	cur        int
	version    any
	lastError  string
	logs       string
	hbTimeout  float64
	heartbeats int
	node       map[string]any
	ports      []any
	agentCalls []string
	// down makes the API answer 503 to everything (Ironic stopped behind
	// its proxy), counting the refused requests.
	down    atomic.Bool
	refused atomic.Int32
}

func newFakeIronic(t testing.TB) *fakeIronic {
	f := &fakeIronic{t: t, state: "clean wait", hbTimeout: 2}
	var gcs struct {
		Params struct {
			Node  map[string]any `json:"node"`
			Ports []any          `json:"ports"`
		} `json:"params"`
	}
	if err := json.Unmarshal(readTestdata(t, "get_clean_steps.request.json"), &gcs); err != nil {
		t.Fatal(err)
	}
	f.node, f.ports = gcs.Params.Node, gcs.Params.Ports
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func ironicError(w http.ResponseWriter, code int, text string) {
	inner, _ := json.Marshal(map[string]any{"faultcode": "Client", "faultstring": text, "debuginfo": nil})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error_message": string(inner)})
}

func (f *fakeIronic) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if b, _ := io.ReadAll(r.Body); len(b) > 0 {
		_ = json.Unmarshal(b, &body)
	}
	ver := r.Header.Get("X-OpenStack-Ironic-API-Version")
	if f.down.Load() {
		f.refused.Add(1)
		ironicError(w, http.StatusServiceUnavailable, "Service Unavailable")
		return
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, request{r.Method, r.URL.RequestURI(), ver, body})
	f.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(readTestdata(f.t, "root.json"))
	case r.Method == http.MethodGet && r.URL.Path == "/v1/lookup":
		if ver == "" {
			ironicError(w, 404, "Resource could not be found.")
			return
		}
		var doc map[string]any
		_ = json.Unmarshal(readTestdata(f.t, "lookup.json"), &doc)
		cfg := doc["config"].(map[string]any)
		cfg["heartbeat_timeout"] = f.hbTimeout
		f.mu.Lock()
		if f.issued {
			cfg["agent_token"] = "******"
		} else {
			f.issued = true
			f.token = cfg["agent_token"].(string)
		}
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/heartbeat/"):
		f.mu.Lock()
		tok := f.token
		f.mu.Unlock()
		if body["agent_token"] != tok || tok == "" {
			ironicError(w, 400, "Invalid or missing agent token received.")
			return
		}
		cb, _ := body["callback_url"].(string)
		ca, _ := body["agent_verify_ca"].(string)
		f.cmu.Lock()
		if f.agentURL != "" && f.agentURL != cb {
			f.cmu.Unlock()
			ironicError(w, 400, "Detected change in ramdisk provided callback_url")
			return
		}
		f.agentURL, f.verifyCA = cb, ca
		f.heartbeats++
		f.cmu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		go f.onHeartbeat()
	default:
		ironicError(w, 404, "Resource could not be found.")
	}
}

func (f *fakeIronic) agentClient() *http.Client {
	if f.client != nil {
		return f.client
	}
	pool := x509.NewCertPool()
	if f.verifyCA != "" && !pool.AppendCertsFromPEM([]byte(f.verifyCA)) {
		f.t.Errorf("agent_verify_ca is not a PEM certificate")
	}
	f.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return f.client
}

// command result as Ironic reads it.
type cmdResult struct {
	ID     string          `json:"id"`
	Name   string          `json:"command_name"`
	Status string          `json:"command_status"`
	Error  json.RawMessage `json:"command_error"`
	Result json.RawMessage `json:"command_result"`
}

func (f *fakeIronic) post(name string, params map[string]any, wait bool) (cmdResult, error) {
	f.agentCalls = append(f.agentCalls, "POST "+name)
	b, _ := json.Marshal(map[string]any{"name": name, "params": params})
	u := fmt.Sprintf("%s/v1/commands/?wait=%t&agent_token=%s", f.agentURL, wait, f.token)
	resp, err := f.agentClient().Post(u, "application/json", bytes.NewReader(b))
	if err != nil {
		return cmdResult{}, err
	}
	defer resp.Body.Close()
	var res cmdResult
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return res, fmt.Errorf("POST %s: HTTP %d: %s", name, resp.StatusCode, data)
	}
	return res, json.Unmarshal(data, &res)
}

func (f *fakeIronic) commands() ([]cmdResult, error) {
	f.agentCalls = append(f.agentCalls, "GET commands")
	// Ironic 21.4 sends no token on GET.
	resp, err := f.agentClient().Get(f.agentURL + "/v1/commands/")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var doc struct {
		Commands []cmdResult `json:"commands"`
	}
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET commands: HTTP %d: %s", resp.StatusCode, data)
	}
	return doc.Commands, json.Unmarshal(data, &doc)
}

// onHeartbeat is 21.4's _heartbeat_clean_wait / process_next_step.
func (f *fakeIronic) onHeartbeat() {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	if f.state != "clean wait" {
		return
	}
	if f.steps == nil {
		if err := f.refreshSteps(); err != nil {
			f.fail(err.Error())
			return
		}
		f.cur = -1
		f.next()
		return
	}
	cmds, err := f.commands()
	if err != nil {
		f.fail(err.Error())
		return
	}
	// 21.4's _freshly_booted: an empty list, or only get_clean_steps: the
	// agent restarted; the conductor moves on to the next step.
	if len(cmds) == 0 || len(cmds) == 1 && cmds[0].Name == "get_clean_steps" {
		if f.cur >= 0 {
			f.next()
		}
		return
	}
	last := cmds[len(cmds)-1]
	if last.Name != "execute_clean_step" || last.Status == "RUNNING" {
		return
	}
	switch last.Status {
	case "FAILED":
		var e struct {
			Details string `json:"details"`
		}
		_ = json.Unmarshal(last.Error, &e)
		if res, err := f.post("log.collect_system_logs", map[string]any{}, true); err == nil {
			var r struct {
				Logs string `json:"system_logs"`
			}
			_ = json.Unmarshal(res.Result, &r)
			f.logs = r.Logs
		}
		f.fail(fmt.Sprintf("Clean step %s.%s failed on node X. %s", f.steps[f.cur]["interface"], f.steps[f.cur]["step"], e.Details))
	case "CLEAN_VERSION_MISMATCH":
		f.fail("version mismatch")
	case "SUCCEEDED":
		var r struct {
			Step map[string]any `json:"clean_step"`
		}
		_ = json.Unmarshal(last.Result, &r)
		cur := f.steps[f.cur]
		if r.Step["step"] != cur["step"] || r.Step["interface"] != cur["interface"] {
			return // result of an older step: wait
		}
		f.next()
	}
}

func (f *fakeIronic) fail(msg string) {
	f.state = "clean failed"
	f.lastError = msg
}

func (f *fakeIronic) refreshSteps() error {
	res, err := f.post("clean.get_clean_steps", map[string]any{"node": f.node, "ports": f.ports}, true)
	if err != nil {
		return err
	}
	if res.Status != "SUCCEEDED" {
		return fmt.Errorf("get_clean_steps: %s %s", res.Status, res.Error)
	}
	var r struct {
		Steps   map[string][]map[string]any `json:"clean_steps"`
		Version any                         `json:"hardware_manager_version"`
	}
	if err := json.Unmarshal(res.Result, &r); err != nil || r.Steps == nil || r.Version == nil {
		return fmt.Errorf("get_clean_steps result lacks clean_steps or hardware_manager_version: %s", res.Result)
	}
	f.version = r.Version
	f.steps = []map[string]any{}
	for _, list := range r.Steps {
		for _, s := range list {
			for _, k := range []string{"interface", "step", "priority"} {
				if _, ok := s[k]; !ok {
					return fmt.Errorf("step %v lacks %s", s, k)
				}
			}
			if s["priority"].(float64) > 0 {
				s["requires_ramdisk"] = true
				f.steps = append(f.steps, s)
			}
		}
	}
	sort.SliceStable(f.steps, func(i, j int) bool { return f.steps[i]["priority"].(float64) > f.steps[j]["priority"].(float64) })
	return nil
}

func (f *fakeIronic) next() {
	f.cur++
	if f.cur >= len(f.steps) {
		f.state = "available"
		f.mu.Lock()
		f.token = "" // Ironic wipes the token when the operation ends
		f.mu.Unlock()
		return
	}
	res, err := f.post("clean.execute_clean_step", map[string]any{
		"step": f.steps[f.cur], "node": f.node, "ports": f.ports, "clean_version": f.version}, false)
	if err != nil {
		f.fail(err.Error())
		return
	}
	// 21.4's execute_step only needs some command_status; a fast step may
	// already be SUCCEEDED in the reply.
	if res.Status == "" {
		f.fail("execute_clean_step answered no command_status")
	}
}

func (f *fakeIronic) currentState() (string, string) {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	return f.state, f.lastError
}

func (f *fakeIronic) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.reqs...)
}

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

func waitState(t *testing.T, f *fakeIronic, want ...string) (string, string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		st, le := f.currentState()
		for _, w := range want {
			if st == w {
				return st, le
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, le := f.currentState()
	t.Fatalf("node stuck in %q (last_error %q), want %v", st, le, want)
	return st, le
}

func TestIronic214AutomatedCleaning(t *testing.T) {
	f := newFakeIronic(t)
	mgr := &testManager{delay: 200 * time.Millisecond}
	startAgent(t, map[string]string{"api_url": f.srv.URL}, Options{Managers: []func() hwmgr.Manager{func() hwmgr.Manager { return mgr }}})
	waitState(t, f, "available", "clean failed")
	if st, le := f.currentState(); st != "available" {
		t.Fatalf("state %s, last_error %s", st, le)
	}
	if got := strings.Join(mgr.steps(), ","); got != "erase_devices_metadata,test_step" {
		t.Errorf("steps run: %s", got)
	}

	reqs := f.requests()
	if reqs[0].method != "GET" || reqs[0].path != "/" {
		t.Errorf("first request %s %s, want GET / (version discovery)", reqs[0].method, reqs[0].path)
	}
	if reqs[1].path != "/v1/lookup?addresses=52%3A54%3Aa9%3A7e%3A01%3A01" || reqs[1].version != "1.62" {
		t.Errorf("lookup: %s at %q", reqs[1].path, reqs[1].version)
	}
	hb := 0
	for _, r := range reqs[2:] {
		if r.method != "POST" || !strings.HasPrefix(r.path, "/v1/heartbeat/ff890ff6-6023-4f5f-9d87-4a3f87f7e551") {
			t.Errorf("unexpected request %s %s", r.method, r.path)
			continue
		}
		hb++
		if r.version != "1.68" {
			t.Errorf("heartbeat at %q, want 1.68", r.version)
		}
		var keys []string
		for k := range r.body {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if strings.Join(keys, ",") != "agent_token,agent_verify_ca,agent_version,callback_url" {
			t.Errorf("heartbeat body keys %v", keys)
		}
		if r.body["agent_token"] != "tiFtwpghhKF8HV0FrSMOh3aAsw31mpadirCo2f7hKu0" {
			t.Errorf("heartbeat token %v", r.body["agent_token"])
		}
		if cb := r.body["callback_url"].(string); !strings.HasPrefix(cb, "https://127.0.0.1:") {
			t.Errorf("callback_url %s: want https (auto TLS at 1.68)", cb)
		}
	}
	if hb < 3 {
		t.Errorf("%d heartbeats, want at least 3", hb)
	}
	f.cmu.Lock()
	calls := strings.Join(f.agentCalls, "; ")
	f.cmu.Unlock()
	if !strings.HasPrefix(calls, "POST clean.get_clean_steps; POST clean.execute_clean_step; GET commands") {
		t.Errorf("conductor calls: %s", calls)
	}
}

func TestIronic214CleanFailure(t *testing.T) {
	f := newFakeIronic(t)
	mgr := &testManager{failStep: "test_step"}
	startAgent(t, map[string]string{"api_url": f.srv.URL}, Options{Managers: []func() hwmgr.Manager{func() hwmgr.Manager { return mgr }}})
	st, le := waitState(t, f, "available", "clean failed")
	if st != "clean failed" {
		t.Fatalf("state %s", st)
	}
	if !strings.Contains(le, "Clean step deploy.test_step failed") || !strings.Contains(le, "/dev/loop7: wipe failed: device busy") {
		t.Errorf("last_error %q does not carry the agent's error", le)
	}
	f.cmu.Lock()
	logs := f.logs
	f.cmu.Unlock()
	if logs == "" {
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
	if got := a.tokens.Token(); got != "tiFtwpghhKF8HV0FrSMOh3aAsw31mpadirCo2f7hKu0" {
		t.Fatalf("token after masked lookup = %q", got)
	}
}

// Ironic's API goes away while a step runs: the agent keeps heartbeating
// (5-10 s after each failure) and cleaning completes once it is back.
func TestIronicDownDuringCleaning(t *testing.T) {
	f := newFakeIronic(t)
	mgr := &testManager{delay: 500 * time.Millisecond}
	startAgent(t, map[string]string{"api_url": f.srv.URL}, Options{Managers: []func() hwmgr.Manager{func() hwmgr.Manager { return mgr }}})
	deadline := time.Now().Add(30 * time.Second)
	for len(mgr.steps()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f.down.Store(true)
	for f.refused.Load() < 2 && time.Now().Before(deadline.Add(30*time.Second)) {
		time.Sleep(50 * time.Millisecond)
	}
	f.down.Store(false)
	if st, le := waitState(t, f, "available", "clean failed"); st != "available" {
		t.Fatalf("state %s: %s", st, le)
	}
	if n := f.refused.Load(); n < 2 {
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
	f := newFakeIronic(t)
	state := t.TempDir()
	slow := &testManager{delay: 3 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	first := startAgent(t, map[string]string{"api_url": f.srv.URL, "state_dir": state}, Options{Hooks: Hooks{Listener: ln},
		Managers: []func() hwmgr.Manager{func() hwmgr.Manager { return slow }}})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		f.cmu.Lock()
		started := f.cur >= 0 && f.steps != nil
		f.cmu.Unlock()
		if started {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.stop()
	firstCA := func() string { f.cmu.Lock(); defer f.cmu.Unlock(); return f.verifyCA }()

	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fast := &testManager{}
	startAgent(t, map[string]string{"api_url": f.srv.URL, "state_dir": state}, Options{Hooks: Hooks{Listener: ln2},
		Managers: []func() hwmgr.Manager{func() hwmgr.Manager { return fast }}})
	if st, le := waitState(t, f, "available", "clean failed"); st != "available" {
		t.Fatalf("state %s: %s", st, le)
	}
	f.cmu.Lock()
	ca := f.verifyCA
	f.cmu.Unlock()
	if ca != firstCA || ca == "" {
		t.Errorf("the restarted agent sent a different agent_verify_ca")
	}
	if got := strings.Join(fast.steps(), ","); got != "test_step" {
		t.Errorf("steps after the restart: %s", got)
	}
	lookups := 0
	for _, r := range f.requests() {
		if strings.HasPrefix(r.path, "/v1/lookup") {
			lookups++
		}
	}
	if lookups != 2 {
		t.Errorf("%d lookups, want 2 (the second one answered with the mask)", lookups)
	}
}
