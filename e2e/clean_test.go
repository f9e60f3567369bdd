package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

// stepTimeout bounds every wait for Ironic to reach a state with the agent
// running: cleaning a 64 MiB loop device takes seconds, heartbeats come
// every 3-6 s.
const stepTimeout = 2 * time.Minute

// writeStep drops an executable clean step into dir: a manifest and a
// shell script.
func writeStep(t *testing.T, dir, name, script string) {
	t.Helper()
	writeStepManifest(t, dir, name, script,
		`{"step": "`+name+`", "interface": "deploy", "priority": 0, "clean": true, "abortable": true, "timeout": 600}`)
}

// writeStepManifest is writeStep with the manifest given.
func writeStepManifest(t *testing.T, dir, name, script, manifest string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestFailingCleanStep is scenario (c): a clean step that fails on the agent
// puts the node into "clean failed" with the agent's error text (the
// step's stderr and exit status) in last_error, and Ironic collects the
// agent's logs.
func TestFailingCleanStep(t *testing.T) {
	s := need(t)
	const mac = "52:54:e2:0c:00:01"
	const complaint = "e2e: the firmware refused the update"
	steps := filepath.Join(t.TempDir(), "steps.d")
	writeStep(t, steps, "e2e_flash_firmware", "cat >/dev/null; echo '"+complaint+"' >&2; exit 3")
	dev := loopDevice(t, 16<<20)
	n := ironic.Enroll(t, t.Context(), s.ironic, ironic.NodeSpec{Name: "e2e-clean-failure"}, mac)
	logsBefore, _ := filepath.Glob(filepath.Join(s.dir, "services", "state", "deploy_logs", "*"))
	got := s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac, Devices: []string{dev}, StepsDir: steps}).Until(
		nodes.ProvisionStateOpts{Target: nodes.TargetClean, CleanSteps: []nodes.CleanStep{{Interface: nodes.InterfaceDeploy, Step: "e2e_flash_firmware"}}},
		"clean failed", stepTimeout).Node
	if !strings.Contains(got.LastError, complaint) || !strings.Contains(got.LastError, "e2e_flash_firmware") {
		t.Errorf("last_error = %q, want the step name and the agent's error text %q", got.LastError, complaint)
	}
	t.Logf("last_error: %s", got.LastError)
	// On a failed step Ironic asks the agent for its logs and stores them.
	deadline := time.Now().Add(20 * time.Second)
	for {
		logsAfter, _ := filepath.Glob(filepath.Join(s.dir, "services", "state", "deploy_logs", "*"))
		if len(logsAfter) > len(logsBefore) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("Ironic stored no agent logs after the failure (deploy_logs has %d entries)", len(logsAfter))
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
}
