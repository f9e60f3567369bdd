package agent

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/api"
	"github.com/ironic-go/ironic-agent/agent/command"
	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/agent/ironic"
)

// A process that died mid-step left its record; the restarted process,
// taking over the kept token, reports that step as FAILED so Ironic fails
// it instead of skipping it.
func TestRestartReportsInterruptedStep(t *testing.T) {
	state := t.TempDir()
	a := &Agent{tokens: &api.Tokens{}, log: slog.New(slog.DiscardHandler), cfg: &config.Config{StateDir: state}}
	a.exec = command.NewExecutor(t.Context(), nil, nil, nil)
	var masked struct {
		Node   map[string]any `json:"node"`
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal(readTestdata(t, "lookup-masked.json"), &masked); err != nil {
		t.Fatal(err)
	}
	uuid, _ := masked.Node["uuid"].(string)
	dir := filepath.Join(state, uuid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	token := strings.Repeat("k", 43)
	if err := os.WriteFile(filepath.Join(dir, "agent-token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	a.nodeUUID = uuid
	a.markStepRunning("clean", "erase_devices") // the earlier process, never cleared
	b, _ := json.Marshal(masked)
	res, err := ironic.ParseLookup(b, "test")
	if err != nil {
		t.Fatal(err)
	}
	a.processLookup(res)
	if a.tokens.Token() != token {
		t.Fatalf("token %q, want the kept one", a.tokens.Token())
	}
	list := a.exec.List()
	if len(list) != 1 {
		t.Fatalf("command list has %d entries, want the interrupted step", len(list))
	}
	st, cerr, _ := list[0].Snapshot()
	if list[0].Name() != "execute_clean_step" || st != command.Failed || cerr == nil || !strings.Contains(cerr.Details, "erase_devices") {
		t.Errorf("reported %s %s %+v, want execute_clean_step FAILED naming erase_devices", list[0].Name(), st, cerr)
	}
	if _, err := os.Stat(filepath.Join(dir, runningStepFile)); !os.IsNotExist(err) {
		t.Errorf("the running-step record is still there after being reported")
	}
	// A step that ends clears its record: nothing to report next time.
	a.markStepRunning("clean", "erase_devices_metadata")()
	if _, err := os.Stat(filepath.Join(dir, runningStepFile)); !os.IsNotExist(err) {
		t.Errorf("the running-step record outlived its step")
	}
}

func TestNodeStateDirNames(t *testing.T) {
	a := &Agent{cfg: &config.Config{StateDir: "/run/state"}}
	for u, ok := range map[string]bool{
		"7a4e2d68-77e0-4c92-8ed4-b147911c59ad":   true,
		"7A4E2D68-77E0-4C92-8ED4-B147911C59AD":   true,
		"7a4e2d6877e04c928ed4b147911c59ad":       true,
		"":                                       false,
		"n1":                                     false,
		"../7a4e2d68-77e0-4c92-8ed4-b147911c5":   false,
		"{7a4e2d68-77e0-4c92-8ed4-b147911c59ad}": false,
		"urn:uuid:7a4e2d68-77e0-4c92-8ed4-b147911c59ad": false,
	} {
		dir, err := a.nodeStateDir(u)
		if (err == nil) != ok {
			t.Errorf("nodeStateDir(%q) = %q, %v; want accepted %v", u, dir, err, ok)
		}
	}
}
