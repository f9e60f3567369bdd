package fakeironic

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
)

// Node states of the cleaning flow.
const (
	StateCleanWait   = "clean wait"
	StateCleanFailed = "clean failed"
	StateAvailable   = "available"
)

// agentCallTimeout bounds one call of the conductor to the agent.
const agentCallTimeout = time.Minute

// Cleaning is Ironic 21.4's conductor doing automated cleaning of the
// server's node (agent_base.py's _heartbeat_clean_wait and
// process_next_step): after each heartbeat it asks the agent for its clean
// steps, runs those of positive priority one by one (highest first),
// polls the command list for each one's end, collects the agent's system
// logs when one fails, and ends the operation (the token with it) when all
// are done. It talks to the agent at the heartbeat's callback_url,
// trusting only its agent_verify_ca, as Ironic does with auto TLS, and
// sends no token on GET, as 21.4 does.
type Cleaning struct {
	server *Server
	node   map[string]any
	ports  []any
	// hbMu guards what the heartbeats tell; the server holds its own
	// lock while it checks one, so this is never held across a call.
	hbMu     sync.Mutex
	agentURL string
	verifyCA string
	// mu guards the conductor's state, held while it calls the agent.
	mu         sync.Mutex
	state      string
	lastError  string
	logs       string
	httpClient *http.Client
	clientCA   string // the CA httpClient trusts
	steps      []map[string]any
	cur        int
	version    any
	calls      []string
}

// NewCleaning puts a cleaning conductor behind s, with the node and ports
// of the recorded get_clean_steps request; call it before s serves. The
// conductor pins the first heartbeat's callback_url: a heartbeat with
// another is refused, as by Ironic.
func NewCleaning(s *Server) (*Cleaning, error) {
	var gcs struct {
		Params struct {
			Node  map[string]any `json:"node"`
			Ports []any          `json:"ports"`
		} `json:"params"`
	}
	if err := json.Unmarshal(document("get_clean_steps.request.json"), &gcs); err != nil {
		return nil, fmt.Errorf("fakeironic: get_clean_steps.request.json: %w", err)
	}
	c := &Cleaning{server: s, node: gcs.Params.Node, ports: gcs.Params.Ports, state: StateCleanWait, cur: -1}
	s.CheckHeartbeat = c.checkHeartbeat
	s.OnHeartbeat = func(Heartbeat) { c.onHeartbeat() }
	return c, nil
}

func (c *Cleaning) checkHeartbeat(body map[string]any) string {
	cb, _ := body["callback_url"].(string)
	ca, _ := body["agent_verify_ca"].(string)
	c.hbMu.Lock()
	defer c.hbMu.Unlock()
	if c.agentURL != "" && c.agentURL != cb {
		return "Detected change in ramdisk provided callback_url"
	}
	c.agentURL, c.verifyCA = cb, ca
	return ""
}

// agent is the client of the agent's API, trusting the CA of the last
// heartbeat.
func (c *Cleaning) agent() (*agentclient.Client, error) {
	c.hbMu.Lock()
	url, ca := c.agentURL, c.verifyCA
	c.hbMu.Unlock()
	if c.httpClient == nil || c.clientCA != ca {
		pool := x509.NewCertPool()
		if ca != "" && !pool.AppendCertsFromPEM([]byte(ca)) {
			return nil, fmt.Errorf("agent_verify_ca is not a PEM certificate: %q", ca)
		}
		c.httpClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		c.clientCA = ca
	}
	return &agentclient.Client{Base: url, Token: c.server.Token, HTTP: c.httpClient, NoTokenOnList: true}, nil
}

func (c *Cleaning) post(name string, params map[string]any, wait bool) (*agentclient.Reply, error) {
	c.calls = append(c.calls, "POST "+name)
	ac, err := c.agent()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), agentCallTimeout)
	defer cancel()
	r, err := ac.Post(ctx, name, params, wait)
	if err != nil {
		return nil, err
	}
	if r.HTTPStatus != http.StatusOK {
		return nil, fmt.Errorf("POST %s: HTTP %d: %s", name, r.HTTPStatus, r.Body)
	}
	return r, nil
}

func (c *Cleaning) commands() ([]agentclient.Reply, error) {
	c.calls = append(c.calls, "GET commands")
	ac, err := c.agent()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), agentCallTimeout)
	defer cancel()
	code, cmds, err := ac.List(ctx)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET commands: HTTP %d", code)
	}
	return cmds, nil
}

// onHeartbeat is 21.4's _heartbeat_clean_wait / process_next_step.
func (c *Cleaning) onHeartbeat() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != StateCleanWait {
		return
	}
	if c.steps == nil {
		if err := c.refreshSteps(); err != nil {
			c.fail(err.Error())
			return
		}
		c.next()
		return
	}
	cmds, err := c.commands()
	if err != nil {
		c.fail(err.Error())
		return
	}
	// 21.4's _freshly_booted: an empty list, or only get_clean_steps: the
	// agent restarted; the conductor moves on to the next step.
	if len(cmds) == 0 || len(cmds) == 1 && cmds[0].Name == "get_clean_steps" {
		if c.cur >= 0 {
			c.next()
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
		if res, err := c.post("log.collect_system_logs", map[string]any{}, true); err == nil {
			var r struct {
				Logs string `json:"system_logs"`
			}
			_ = json.Unmarshal(res.Result, &r)
			c.logs = r.Logs
		}
		c.fail(fmt.Sprintf("Clean step %s.%s failed on node X. %s", c.steps[c.cur]["interface"], c.steps[c.cur]["step"], e.Details))
	case "CLEAN_VERSION_MISMATCH":
		c.fail("version mismatch")
	case "SUCCEEDED":
		var r struct {
			Step map[string]any `json:"clean_step"`
		}
		_ = json.Unmarshal(last.Result, &r)
		cur := c.steps[c.cur]
		if r.Step["step"] != cur["step"] || r.Step["interface"] != cur["interface"] {
			return // the result of an older step: wait
		}
		c.next()
	}
}

func (c *Cleaning) fail(msg string) {
	c.state = StateCleanFailed
	c.lastError = msg
}

func (c *Cleaning) refreshSteps() error {
	res, err := c.post("clean.get_clean_steps", map[string]any{"node": c.node, "ports": c.ports}, true)
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
	c.version = r.Version
	c.steps = []map[string]any{}
	for _, list := range r.Steps {
		for _, s := range list {
			for _, k := range []string{"interface", "step", "priority"} {
				if _, ok := s[k]; !ok {
					return fmt.Errorf("step %v lacks %s", s, k)
				}
			}
			if p, ok := s["priority"].(float64); !ok {
				return fmt.Errorf("step %v: priority is not a number", s)
			} else if p > 0 {
				s["requires_ramdisk"] = true
				c.steps = append(c.steps, s)
			}
		}
	}
	slices.SortStableFunc(c.steps, func(a, b map[string]any) int {
		pa, pb := a["priority"].(float64), b["priority"].(float64)
		switch {
		case pa > pb:
			return -1
		case pa < pb:
			return 1
		}
		return 0
	})
	return nil
}

func (c *Cleaning) next() {
	c.cur++
	if c.cur >= len(c.steps) {
		c.state = StateAvailable
		c.server.wipeToken()
		return
	}
	res, err := c.post("clean.execute_clean_step", map[string]any{
		"step": c.steps[c.cur], "node": c.node, "ports": c.ports, "clean_version": c.version}, false)
	if err != nil {
		c.fail(err.Error())
		return
	}
	// 21.4's execute_step only needs some command_status; a fast step may
	// already be SUCCEEDED in the reply.
	if res.Status == "" {
		c.fail("execute_clean_step answered no command_status")
	}
}

// State is the node's provision state and last_error.
func (c *Cleaning) State() (state, lastError string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state, c.lastError
}

// WaitState polls the node's state until it is one of want, and returns
// it with last_error; it fails when ctx ends first.
func (c *Cleaning) WaitState(ctx context.Context, want ...string) (state, lastError string, err error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		state, lastError = c.State()
		if slices.Contains(want, state) {
			return state, lastError, nil
		}
		select {
		case <-ctx.Done():
			return state, lastError, fmt.Errorf("node stuck in %q (last_error %q), want %v: %w", state, lastError, want, ctx.Err())
		case <-tick.C:
		}
	}
}

// Running says whether the conductor has started a clean step.
func (c *Cleaning) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.steps != nil && c.cur >= 0
}

// AgentCalls are the conductor's calls to the agent so far:
// "POST clean.get_clean_steps", "GET commands", ...
func (c *Cleaning) AgentCalls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// SystemLogs is the system_logs of the collect_system_logs the conductor
// ran after a failed step ("" if none).
func (c *Cleaning) SystemLogs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logs
}

// VerifyCA is the agent_verify_ca of the last accepted heartbeat.
func (c *Cleaning) VerifyCA() string {
	c.hbMu.Lock()
	defer c.hbMu.Unlock()
	return c.verifyCA
}
