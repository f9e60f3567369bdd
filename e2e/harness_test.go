package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

// TestHarnessStateMachine checks the harness alone: a node enrolls, goes
// manageable and, without cleaning, available; the APIs answer.
func TestHarnessStateMachine(t *testing.T) {
	s := need(t)
	ctx := t.Context()
	no := false
	n := ironic.Enroll(t, t.Context(), s.ironic, ironic.NodeSpec{Name: "harness-sm", AutomatedClean: &no}, "52:54:e2:00:00:01")
	if err := s.ironic.Provision(ctx, n.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetProvide}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, n.UUID, "available", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := s.ironic.Ports(ctx, ports.ListOpts{NodeUUID: n.UUID})
	if err != nil || len(got) != 1 || got[0].Address != "52:54:e2:00:00:01" {
		t.Fatalf("ports = %+v, %v", got, err)
	}
}

// TestHarnessStandIn drives automated cleaning with a minimal in-test
// stand-in agent that reports no clean steps, to prove the harness's Ironic
// config (lookup, token, heartbeat, callback) without our agent binary.
func TestHarnessStandIn(t *testing.T) {
	s := need(t)
	ctx := t.Context()
	const mac = "52:54:e2:00:00:02"
	n := ironic.Enroll(t, t.Context(), s.ironic, ironic.NodeSpec{Name: "harness-standin"}, mac)

	var mu sync.Mutex
	var commands []map[string]any
	var seen []string
	agent := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			json.NewEncoder(w).Encode(map[string]any{"commands": commands})
			return
		}
		var body struct {
			Name string `json:"name"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		seen = append(seen, body.Name)
		short := body.Name[strings.LastIndex(body.Name, ".")+1:]
		res := map[string]any{"id": fmt.Sprint(len(commands)), "command_name": short, "command_status": "SUCCEEDED", "command_error": nil, "command_result": nil}
		if short == "get_clean_steps" {
			res["command_result"] = map[string]any{"clean_steps": map[string]any{"GenericHardwareManager": []any{}}, "hardware_manager_version": map[string]any{"generic_hardware_manager": "1.2"}}
		}
		commands = append(commands, res)
		json.NewEncoder(w).Encode(res)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:9290")
	if err != nil {
		t.Fatal(err)
	}
	agent.Listener = l
	// Ironic >= 26 refuses a plain-http callback ([agent]require_tls); the
	// stand-in then serves httptest's certificate and hands it to Ironic
	// as agent_verify_ca, as auto-TLS does.
	verifyCA := ""
	if s.series.RequiresTLS() {
		agent.StartTLS()
		verifyCA = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: agent.Certificate().Raw}))
	} else {
		agent.Start()
	}
	defer agent.Close()

	if err := s.ironic.Provision(ctx, n.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetProvide}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ironic.WaitState(ctx, n.UUID, "clean wait", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	token, err := standInLookup(ctx, s.services.IronicURL, mac)
	if err != nil {
		t.Fatal(err)
	}
	if len(token) < 32 {
		t.Fatalf("lookup gave token %q, want a fresh one", token)
	}
	// Heartbeat until the node is available; each accepted heartbeat moves
	// the conductor on (get_clean_steps, then finishing cleaning).
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, msg := standInHeartbeat(ctx, s.services.IronicURL, n.UUID, token, agent.URL, verifyCA)
		cur, err := s.ironic.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.ProvisionState == "available" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node never became available; last heartbeat %d %s; %s", code, msg, ironic.Describe(cur))
		}
		time.Sleep(time.Second)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[0] != "clean.get_clean_steps" {
		t.Errorf("commands from Ironic = %v, want clean.get_clean_steps first", seen)
	}
}

func standInLookup(ctx context.Context, ironicURL, mac string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ironicURL+"/v1/lookup?addresses="+mac, nil)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.62")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("lookup: %s", resp.Status)
	}
	var out struct {
		Config struct {
			AgentToken string `json:"agent_token"`
		} `json:"config"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", err
	}
	return out.Config.AgentToken, nil
}

func standInHeartbeat(ctx context.Context, ironicURL, uuid, token, callback, verifyCA string) (int, string) {
	hb := map[string]string{"callback_url": callback, "agent_token": token, "agent_version": "9.4.1"}
	if verifyCA != "" {
		hb["agent_verify_ca"] = verifyCA
	}
	body, _ := json.Marshal(hb)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ironicURL+"/v1/heartbeat/"+uuid, bytes.NewReader(body))
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.68")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	return resp.StatusCode, b.String()
}
