package standin

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/fakeironic"
)

// post sends one command to the stand-in's API.
func post(t *testing.T, base, name string, params map[string]any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"name": name, "params": params})
	resp, err := http.Post(base+"/v1/commands/?wait=true", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s, %v", name, resp.Status, err)
	}
	return out
}

// TestStandIn: the stand-in looks the node up and heartbeats with its
// callback URL and the token, lists the generic manager's clean steps as
// the agent does, and answers a step at once with success, echoing the
// step as Ironic checks it.
func TestStandIn(t *testing.T) {
	ir := &fakeironic.Server{NodeUUID: "2f7a6c1e-0000-4000-8000-000000000001", Token: "tok-123", HeartbeatTimeout: 60}
	api := httptest.NewServer(ir)
	defer api.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := New(Config{IronicURL: api.URL, MACs: []string{"52:54:00:12:34:56"}, Listener: ln}).Start(ctx)
	defer func() {
		r.Kill()
		if err := r.Err(); err != nil {
			t.Error(err)
		}
	}()
	var callback string
	if err := ir.Wait(ctx, func(_ []time.Time, hbs []fakeironic.Heartbeat) bool {
		if len(hbs) == 0 {
			return false
		}
		callback, _ = hbs[0].Body["callback_url"].(string)
		return hbs[0].Body["agent_token"] == "tok-123"
	}); err != nil {
		t.Fatal(err)
	}
	if callback != "http://"+ln.Addr().String() {
		t.Fatalf("callback_url %q, want the listener's", callback)
	}

	steps := post(t, callback, "clean.get_clean_steps", map[string]any{"node": map[string]any{}, "ports": []any{}})
	res, _ := json.Marshal(steps["command_result"])
	if steps["command_status"] != "SUCCEEDED" || !strings.Contains(string(res), `"interface":"deploy","priority":99,"reboot_requested":false,"step":"erase_devices_metadata"`) ||
		!strings.Contains(string(res), `"hardware_manager_version":{"generic_hardware_manager"`) {
		t.Errorf("get_clean_steps = %v", steps)
	}
	step := map[string]any{"step": "erase_devices_metadata", "priority": 99, "interface": "deploy"}
	ran := post(t, callback, "clean.execute_clean_step", map[string]any{"step": step, "node": map[string]any{}, "ports": []any{}})
	if got, _ := json.Marshal(ran["command_result"]); ran["command_status"] != "SUCCEEDED" ||
		string(got) != `{"clean_result":null,"clean_step":{"interface":"deploy","priority":99,"step":"erase_devices_metadata"}}` {
		t.Errorf("execute_clean_step = %v (result %s)", ran, got)
	}
	resp, err := http.Get(callback + "/v1/commands/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Commands []map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Commands) != 2 || list.Commands[1]["command_name"] != "execute_clean_step" {
		t.Errorf("commands = %+v, %v", list, err)
	}
}

// A stand-in without its Ironic, MACs or listener says so.
func TestRunNeedsConfig(t *testing.T) {
	if err := New(Config{}).Run(t.Context()); err == nil || !strings.Contains(err.Error(), "required") {
		t.Errorf("Run without a config: %v", err)
	}
}
