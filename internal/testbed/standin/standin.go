// Package standin is a stand-in agent: it looks the node up and
// heartbeats as the agent does (agent/ironic's client, the agent's own
// Heartbeater and its schedule) and answers every agent API command at
// once with success, doing nothing. Taking a node through a flow with it
// measures what Ironic's own polling costs (the waits between heartbeats,
// the conductor's periodic tasks), the floor under the same flow with the
// real agent (e2e/vm's TestVMCleaningFloor).
//
// It reports the generic hardware manager's steps, as the agent lists
// them, so Ironic plans the same steps; each returns at once.
package standin

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/agent/ironic"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/version"
)

// Config is what the stand-in needs.
type Config struct {
	// IronicURL is Ironic's API.
	IronicURL string
	// MACs are the node's ports, for lookup.
	MACs []string
	// Listener serves the agent API; its address is the callback URL
	// handed to Ironic (a loopback port of the test's).
	Listener net.Listener
	// TLS serves the API over TLS with a fresh certificate, handed to
	// Ironic as agent_verify_ca, as the agent's auto-TLS does (Ironic >= 26
	// refuses a plain-http callback).
	TLS bool
	// LookupTimeout bounds the lookup retries (0: 5 minutes).
	LookupTimeout time.Duration
	Log           *slog.Logger
}

// Command is one command Ironic sent, as the stand-in recorded it.
type Command struct {
	Name string    // "clean.execute_clean_step"
	At   time.Time // when it arrived
}

// Agent is a running stand-in.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	managers *hwmgr.Set
	hb       *agent.Heartbeater

	mu       sync.Mutex
	results  []map[string]any
	received []Command
}

// New returns a stand-in of cfg; Run starts it.
func New(cfg Config) *Agent {
	return &Agent{cfg: cfg, log: logging.OrDiscard(cfg.Log)}
}

// Run serves the agent API, looks the node up and heartbeats until ctx
// ends; the error says why it stopped before (a failed lookup). The
// listener is closed when it returns.
func (a *Agent) Run(ctx context.Context) error {
	cfg := a.cfg
	if cfg.IronicURL == "" || len(cfg.MACs) == 0 || cfg.Listener == nil {
		return errors.New("standin: IronicURL, MACs and Listener are required")
	}
	if cfg.LookupTimeout == 0 {
		cfg.LookupTimeout = 5 * time.Minute
	}
	var err error
	a.managers, err = hwmgr.Load(ctx, []func() hwmgr.Manager{func() hwmgr.Manager { return &agent.GenericManager{} }}, a.log)
	if err != nil {
		cfg.Listener.Close()
		return fmt.Errorf("standin: %w", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(a.serve))
	srv.Listener.Close()
	srv.Listener = cfg.Listener
	verifyCA := ""
	if cfg.TLS {
		srv.StartTLS()
		verifyCA = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	} else {
		srv.Start()
	}
	defer srv.Close()

	client, err := ironic.NewClient([]string{cfg.IronicURL}, &http.Client{Timeout: time.Minute}, "")
	if err != nil {
		return fmt.Errorf("standin: %w", err)
	}
	client.Log = a.log
	res, err := client.LookupNode(ctx, ironic.Backoff{}, cfg.MACs, "", cfg.LookupTimeout, time.Second)
	if err != nil {
		return fmt.Errorf("standin: %w", err)
	}
	token := ""
	if res.Config.AgentToken != nil {
		token = *res.Config.AgentToken
	}
	timeout := time.Duration(res.Config.HeartbeatTimeout * float64(time.Second))
	hb := ironic.Heartbeat{CallbackURL: srv.URL, Token: token, AgentVersion: version.Version(), VerifyCA: verifyCA}
	beats := agent.NewHeartbeater(func(ctx context.Context) error { return client.SendHeartbeat(ctx, res.NodeUUID, hb) },
		func() time.Duration { return timeout }, a.log)
	a.mu.Lock()
	a.hb = beats
	a.mu.Unlock()
	beats.Run(ctx)
	return nil
}

// Running is a stand-in Start runs in the background: to the test bed's
// lifecycle driver (internal/testbed/lifecycle), a boot of the ramdisk.
type Running struct {
	*Agent
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start runs a in the background until ctx ends or Kill.
func (a *Agent) Start(ctx context.Context) *Running {
	ctx, cancel := context.WithCancel(ctx)
	r := &Running{Agent: a, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = a.Run(ctx)
	}()
	return r
}

// Done is closed once Run has returned.
func (r *Running) Done() <-chan struct{} { return r.done }

// Kill stops the stand-in and waits for Run to return.
func (r *Running) Kill() {
	r.cancel()
	<-r.done
}

// Err is why Run stopped before it was told to (a failed lookup), once
// Done is closed; nil while it runs.
func (r *Running) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// Received lists the commands Ironic sent so far, in order.
func (a *Agent) Received() []Command {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Command(nil), a.received...)
}

// asyncCommands are the commands the agent runs in the background: Ironic
// polls their result, and the agent heartbeats soon after one ends.
var asyncCommands = map[string]bool{
	"clean.execute_clean_step": true, "deploy.execute_deploy_step": true, "service.execute_service_step": true,
	"standby.prepare_image": true, "standby.cache_image": true, "standby.power_off": true, "standby.sync": true,
	"image.install_bootloader": true,
}

// serve is the agent API: POST /v1/commands/ runs a command (at once),
// GET /v1/commands/ lists the results, GET /v1/commands/ID one of them.
func (a *Agent) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case r.Method == http.MethodPost && path == "/v1/commands":
		var body struct {
			Name   string                     `json:"name"`
			Params map[string]json.RawMessage `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Name == "" {
			http.Error(w, `{"faultstring": "want a JSON body with a command name"}`, http.StatusBadRequest)
			return
		}
		res, err := a.run(r.Context(), body.Name, body.Params)
		if err != nil {
			http.Error(w, fmt.Sprintf(`{"faultstring": %q}`, err.Error()), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(res)
		a.mu.Lock()
		hb := a.hb
		a.mu.Unlock()
		if asyncCommands[body.Name] && hb != nil {
			hb.Force()
		}
	case r.Method == http.MethodGet && path == "/v1/commands":
		a.mu.Lock()
		defer a.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"commands": a.results})
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/v1/commands/"):
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, c := range a.results {
			if c["id"] == strings.TrimPrefix(path, "/v1/commands/") {
				_ = json.NewEncoder(w).Encode(c)
				return
			}
		}
		http.NotFound(w, r)
	case r.Method == http.MethodGet && (path == "" || path == "/v1"):
		_ = json.NewEncoder(w).Encode(map[string]any{"name": "ironic-agent stand-in", "version": version.Version()})
	default:
		http.NotFound(w, r)
	}
}

// run records a command and its result: success, with what Ironic reads
// from it (the steps, the step executed).
func (a *Agent) run(ctx context.Context, name string, params map[string]json.RawMessage) (map[string]any, error) {
	_, short, ok := strings.Cut(name, ".")
	if !ok {
		return nil, fmt.Errorf("command %q: want EXTENSION.COMMAND", name)
	}
	var result any
	switch short {
	case "get_clean_steps", "get_deploy_steps", "get_service_steps":
		kind := strings.TrimSuffix(strings.TrimPrefix(short, "get_"), "_steps")
		var steps map[string][]hwmgr.Step
		var err error
		switch kind {
		case "clean":
			steps, err = a.managers.CleanSteps(ctx, nil, nil)
		case "deploy":
			steps, err = a.managers.DeploySteps(ctx, nil, nil)
		default:
			steps, err = a.managers.ServiceSteps(ctx, nil, nil)
		}
		if err != nil {
			return nil, err
		}
		result = map[string]any{kind + "_steps": steps, "hardware_manager_version": a.managers.Versions()}
	case "execute_clean_step", "execute_deploy_step", "execute_service_step":
		kind := strings.TrimSuffix(strings.TrimPrefix(short, "execute_"), "_step")
		result = map[string]any{kind + "_result": nil, kind + "_step": params["step"]}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.received = append(a.received, Command{Name: name, At: time.Now()})
	res := map[string]any{"id": strconv.Itoa(len(a.results)), "command_name": short, "command_params": params,
		"command_status": "SUCCEEDED", "command_error": nil, "command_result": result}
	a.results = append(a.results, res)
	a.log.Info("stand-in command", "name", name)
	return res, nil
}
