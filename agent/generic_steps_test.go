package agent

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/hwmgr"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/generic-steps.golden.json")

// notImplemented are the steps of IPA 13's generic lists this agent does
// not list (docs/steps.md): GPU burn-in and
// bootc.
var notImplemented = []string{"burnin_gpu", "execute_bootc_install"}

type stepLists struct {
	Version map[string]string `json:"hardware_manager_version"`
	Clean   []hwmgr.Step      `json:"clean_steps"`
	Deploy  []hwmgr.Step      `json:"deploy_steps"`
	Service []hwmgr.Step      `json:"service_steps"`
}

// allSteps lists a table with its unimplemented entries.
func allSteps(table []genericStep) []hwmgr.Step {
	for i := range table {
		if table[i].run == nil {
			table[i].run = func(context.Context, hwmgr.Request) (any, error) { return nil, nil }
		}
	}
	return list(table)
}

func TestGenericStepTablesAreIPA13s(t *testing.T) {
	b, err := os.ReadFile("testdata/ipa13-generic-steps.json")
	if err != nil {
		t.Fatal(err)
	}
	var ipa stepLists
	if err := json.Unmarshal(b, &ipa); err != nil {
		t.Fatal(err)
	}
	g := &GenericManager{}
	ours := stepLists{Version: map[string]string{g.Name(): g.Version()},
		Clean: allSteps(g.cleanSteps()), Deploy: allSteps(g.deploySteps()), Service: allSteps(g.serviceSteps())}
	// Every entry, implemented or not, is IPA's: name, interface, priority,
	// flags, argsinfo, order.
	if !reflect.DeepEqual(mustJSON(ours), mustJSON(ipa)) {
		t.Errorf("tables differ from IPA 13's:\nours %s\nIPA  %s", mustJSON(ours), mustJSON(ipa))
	}

	// What is listed is IPA's lists less notImplemented, and the golden
	// file shows it as Ironic receives it.
	ctx := context.Background()
	listed := stepLists{Version: map[string]string{g.Name(): g.Version()}}
	listed.Clean, _ = g.CleanSteps(ctx, nil, nil)
	listed.Deploy, _ = g.DeploySteps(ctx, nil, nil)
	listed.Service, _ = g.ServiceSteps(ctx, nil, nil)
	without := func(steps []hwmgr.Step) []hwmgr.Step {
		return slices.DeleteFunc(slices.Clone(steps), func(s hwmgr.Step) bool { return slices.Contains(notImplemented, s.Step) })
	}
	want := stepLists{Version: ipa.Version, Clean: without(ipa.Clean), Deploy: without(ipa.Deploy), Service: without(ipa.Service)}
	if !reflect.DeepEqual(mustJSON(listed), mustJSON(want)) {
		t.Errorf("listed steps are not IPA 13's less %v:\nlisted %s\nwant   %s", notImplemented, mustJSON(listed), mustJSON(want))
	}
	got, err := json.MarshalIndent(listed, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	const golden = "testdata/generic-steps.golden.json"
	if *updateGolden {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantGolden, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(wantGolden) {
		t.Errorf("step lists differ from %s (go test ./agent -run StepTables -update rewrites it):\n%s", golden, got)
	}
}

func TestServiceExtension(t *testing.T) {
	ra := standalone(t, Options{}, nil)
	node := map[string]any{"uuid": "n-1", "properties": map[string]any{}}
	code, r := call(t, ra, "service.get_service_steps", map[string]any{"node": node, "ports": []any{}})
	if code != 200 || r["command_status"] != "SUCCEEDED" {
		t.Fatalf("get_service_steps: %d %v", code, r)
	}
	res := string(mustJSON(r["command_result"]))
	if !strings.Contains(res, `"hardware_manager_version":{"generic_hardware_manager":"1.2"}`) ||
		!strings.Contains(res, `"service_steps":{"GenericHardwareManager":[`) ||
		!strings.Contains(res, `"step":"inject_files"`) || strings.Contains(res, `"step":"burnin_disk"`) {
		t.Errorf("get_service_steps %s", res)
	}
	version := map[string]any{"generic_hardware_manager": GenericManagerVersion}

	// No files to inject: the step succeeds and says so, the result
	// carries the step as sent.
	step := map[string]any{"step": "inject_files", "interface": "deploy", "priority": 0, "args": map[string]any{"files": []any{}}}
	_, r = call(t, ra, "service.execute_service_step", map[string]any{"node": node, "ports": []any{}, "step": step, "service_version": version})
	if r["command_status"] != "SUCCEEDED" {
		t.Fatalf("execute_service_step: %v", r)
	}
	if got := string(mustJSON(r["command_result"])); got != `{"service_result":null,"service_step":{"args":{"files":[]},"interface":"deploy","priority":0,"step":"inject_files"}}` {
		t.Errorf("execute_service_step result %s", got)
	}

	// A version other than ours is IPA's VersionMismatch (with IPA's
	// CLEAN_VERSION_MISMATCH status, whatever the kind of step).
	_, r = call(t, ra, "service.execute_service_step", map[string]any{"node": node, "ports": []any{}, "step": step,
		"service_version": map[string]any{"generic_hardware_manager": "1.1"}})
	if e, _ := r["command_error"].(map[string]any); r["command_status"] != "CLEAN_VERSION_MISMATCH" || e["type"] != "VersionMismatch" {
		t.Errorf("version mismatch: %v", r)
	}

	// A failing step is a ServicingError; bad arguments stay
	// InvalidCommandParamsError.
	bad := map[string]any{"step": "inject_files", "interface": "deploy", "priority": 0,
		"args": map[string]any{"files": []any{map[string]any{"path": "/etc/x", "content": "eA==", "partition": "/dev/nonexistent-ironic-agent-test"}}}}
	_, r = call(t, ra, "service.execute_service_step", map[string]any{"node": node, "ports": []any{}, "step": bad, "service_version": version})
	if e, _ := r["command_error"].(map[string]any); r["command_status"] != "FAILED" || e["type"] != "ServicingError" {
		t.Errorf("failing service step: %v", r)
	}
	bad["args"] = map[string]any{"files": "not a list"}
	_, r = call(t, ra, "service.execute_service_step", map[string]any{"node": node, "ports": []any{}, "step": bad, "service_version": version})
	if e, _ := r["command_error"].(map[string]any); r["command_status"] != "FAILED" || e["type"] != "InvalidCommandParamsError" {
		t.Errorf("bad files argument: %v", r)
	}
}
