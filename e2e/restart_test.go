package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

// markerSteps writes two executable clean steps into a new steps
// directory: "e2e_slow" (touches started, sleeps, touches finished) and
// "e2e_mark" (touches marked). Step files show, from outside the agent,
// which steps really ran.
func markerSteps(t *testing.T, sleep time.Duration) (dir, started, finished, marked string) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "steps.d")
	started = filepath.Join(base, "slow.started")
	finished = filepath.Join(base, "slow.finished")
	marked = filepath.Join(base, "marked")
	writeStep(t, dir, "e2e_slow", fmt.Sprintf("cat >/dev/null; touch %s; sleep %d; touch %s", started, int(sleep.Seconds()), finished))
	writeStep(t, dir, "e2e_mark", "cat >/dev/null; touch "+marked)
	return dir, started, finished, marked
}

// slowManualClean enrolls a node for manual cleaning with the marker
// steps [e2e_slow (sleeping sleep), e2e_mark] (slowClean), whose agent
// runs with the returned steps directory.
func (s *suite) slowManualClean(t *testing.T, name, mac string, sleep time.Duration) (n *nodes.Node, steps, started, finished, marked string) {
	t.Helper()
	return slowManualCleanOn(t, s.ironic, name, mac, sleep)
}

// slowManualCleanOn is slowManualClean against the Ironic of client c.
func slowManualCleanOn(t *testing.T, c *ironic.Client, name, mac string, sleep time.Duration) (n *nodes.Node, steps, started, finished, marked string) {
	t.Helper()
	steps, started, finished, marked = markerSteps(t, sleep)
	n = ironic.Enroll(t, t.Context(), c, ironic.NodeSpec{Name: name}, mac)
	return n, steps, started, finished, marked
}

// slowClean is the manual cleaning with the marker steps.
var slowClean = nodes.ProvisionStateOpts{Target: nodes.TargetClean, CleanSteps: []nodes.CleanStep{
	{Interface: nodes.InterfaceDeploy, Step: "e2e_slow"},
	{Interface: nodes.InterfaceDeploy, Step: "e2e_mark"},
}}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !exists(path) {
		if time.Now().After(deadline) {
			t.Fatalf("%s not created within %s", path, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestAgentRestartAfterRebootStep is scenario (f): during automated
// cleaning a clean step asks for a reboot; Ironic (fake power) "reboots"
// and wipes the agent token; the agent process is restarted, as the ramdisk
// would boot again, looks up, receives a fresh token, and cleaning goes on
// with the next step to available. (Ironic 21.4 honours reboot_requested
// only for steps from the agent's own list, i.e. automated cleaning.)
func TestAgentRestartAfterRebootStep(t *testing.T) {
	s := need(t)
	ctx := t.Context()
	const mac = "52:54:e2:0f:00:01"
	base := t.TempDir()
	steps := filepath.Join(base, "steps.d")
	rebooted := filepath.Join(base, "reboot-step.ran")
	marked := filepath.Join(base, "marked")
	writeStepManifest(t, steps, "e2e_needs_reboot", "cat >/dev/null; touch "+rebooted,
		`{"step": "e2e_needs_reboot", "interface": "deploy", "priority": 50, "clean": true, "reboot_requested": true}`)
	writeStepManifest(t, steps, "e2e_after_reboot", "cat >/dev/null; touch "+marked,
		`{"step": "e2e_after_reboot", "interface": "deploy", "priority": 40, "clean": true}`)
	dev := loopDevice(t, 16<<20)
	n := ironic.Enroll(t, t.Context(), s.ironic, ironic.NodeSpec{Name: "e2e-restart-reboot"}, mac)
	d := s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac, StepsDir: steps, Port: freePort(t), Devices: []string{dev}})
	d.Start(nodes.ProvisionStateOpts{Target: nodes.TargetProvide})
	// Ironic marks the reboot it asked the power interface for.
	_, err := s.ironic.WaitFor(ctx, n.UUID, stepTimeout, "cleaning_reboot set", func(n *nodes.Node) bool {
		return n.DriverInternalInfo["cleaning_reboot"] == true
	})
	if err != nil {
		t.Fatal(err)
	}
	if !exists(rebooted) || exists(marked) {
		t.Fatalf("before the reboot: reboot step ran %v (want true), next step ran %v (want false)", exists(rebooted), exists(marked))
	}
	// The reboot Ironic asked fake power for: the same agent again.
	d.Reboot()
	d.Wait("available", stepTimeout)
	if !exists(marked) {
		t.Error("cleaning ended but the step after the reboot never ran")
	}
}

// TestAgentCrashMidStep is scenario (f) for a crash: the agent process is
// killed (SIGKILL) while it runs a clean step and started again. The new
// process gets the masked token at lookup and carries on with the token and
// certificate the old one kept for this boot. Its command list would be
// empty, which Ironic takes as "step done" (an interrupted erase would count
// as erased), so it reports the interrupted step as FAILED instead: the node
// goes to "clean failed" naming the step and the restart, and the next step
// never runs.
func TestAgentCrashMidStep(t *testing.T) {
	s := need(t)
	const mac = "52:54:e2:0f:00:02"
	n, steps, started, finished, marked := s.slowManualClean(t, "e2e-crash", mac, 30*time.Second)
	d := s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac, StepsDir: steps, Port: freePort(t), StateDir: filepath.Join(t.TempDir(), "state")})
	d.Start(slowClean)
	waitFile(t, started, stepTimeout)
	// The crash (SIGKILL) and the agent's next start. Only the kept token
	// can make the second agent's heartbeats count: Ironic hands it the
	// mask.
	d.Reboot()
	got := d.Wait("clean failed", stepTimeout)
	if le := got.LastError; !strings.Contains(le, "e2e_slow") || !strings.Contains(le, "restarted") {
		t.Errorf("last_error = %q, want the interrupted step and the restart named", le)
	}
	t.Logf("last_error: %s", got.LastError)
	if exists(finished) {
		t.Error("the killed step finished anyway: its process outlived the agent's PID namespace")
	}
	if exists(marked) {
		t.Error("the step after the interrupted one ran")
	}
}

// TestIronicDownDuringCleaning is a fault: while the agent runs a clean
// step, all of Ironic (the single-process ironic: API and conductor) is
// stopped for 20 s and started again. The step finishes meanwhile; the
// agent's heartbeats fail and it keeps trying; the restarted conductor
// picks the node up where it was, a heartbeat lands, the conductor reads the
// finished step and cleaning completes. (The 60 s outage of the API alone
// is TestIronicAPIDownDuringCleaning.)
func TestIronicDownDuringCleaning(t *testing.T) {
	s := need(t)
	ctx := t.Context()
	const mac = "52:54:e2:1a:00:01"
	n, steps, started, finished, marked := s.slowManualClean(t, "e2e-ironic-down", mac, 5*time.Second)
	d := s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac, StepsDir: steps})
	a, _ := d.Start(slowClean)
	waitFile(t, started, stepTimeout)
	// Stop only once the conductor is done dispatching (clean wait with the
	// step recorded), so no node lock is held when the process goes.
	_, err := s.ironic.WaitFor(ctx, n.UUID, 30*time.Second, "clean wait on e2e_slow", func(n *nodes.Node) bool {
		return n.ProvisionState == "clean wait" && n.CleanStep["step"] == "e2e_slow"
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := s.services.StopIronic(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Leave Ironic running for the next test whatever happened.
		_ = s.services.StartIronic(t.Context())
	})
	waitFile(t, finished, 30*time.Second)
	time.Sleep(20*time.Second - time.Since(stopped))
	if dead, err := a.Exited(); dead {
		t.Fatalf("agent exited while Ironic was down: %v", err)
	}
	if err := s.services.StartIronic(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Ironic was down %s", time.Since(stopped).Round(time.Second))
	d.Wait("manageable", stepTimeout)
	if !exists(marked) {
		t.Error("cleaning ended but the step after the outage never ran")
	}
}

// TestIronicAPIDownDuringCleaning is the fault with only Ironic's API
// stopped: a split Ironic of its own (ironic-api and ironic-conductor over
// JSON-RPC, on free ports) whose API is stopped for 60 s while the agent
// runs a clean step; the conductor keeps running, the agent's heartbeats
// fail and it keeps trying; once the API is back cleaning completes.
func TestIronicAPIDownDuringCleaning(t *testing.T) {
	s := need(t)
	// The subject is the agent's heartbeat retry while the API is away;
	// TestIronicDownDuringCleaning keeps a restart of Ironic in every series.
	s.seriesIndependent(t)
	ctx := t.Context()
	split := ironic.StartForTest(t, t.Context(), s.config(ironic.Config{Split: true, NoInspector: true}))
	t.Logf("split Ironic up in %s", split.Timings.Ironic.Round(time.Millisecond))
	c := split.Ironic
	const mac = "52:54:e2:1a:00:02"
	n, steps, started, finished, marked := slowManualCleanOn(t, c, "e2e-api-down", mac, 5*time.Second)
	d := s.driver(t, c, n.UUID, agentOpts{MAC: mac, StepsDir: steps, APIURL: split.IronicURL})
	a, _ := d.Start(slowClean)
	waitFile(t, started, stepTimeout)
	if _, err := c.WaitFor(ctx, n.UUID, 30*time.Second, "clean wait on e2e_slow", func(n *nodes.Node) bool {
		return n.ProvisionState == "clean wait" && n.CleanStep["step"] == "e2e_slow"
	}); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := split.StopAPI(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, finished, 30*time.Second)
	time.Sleep(60*time.Second - time.Since(stopped))
	if dead, err := a.Exited(); dead {
		t.Fatalf("agent exited while Ironic's API was down: %v", err)
	}
	if err := split.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Ironic's API was down %s", time.Since(stopped).Round(time.Second))
	d.Wait("manageable", stepTimeout)
	if !exists(marked) {
		t.Error("cleaning ended but the step after the outage never ran")
	}
}

func tailBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// agentClient returns an HTTP client that trusts the agent's self-signed
// certificate as Ironic does (driver_internal_info.agent_verify_ca), or
// plain HTTP when the agent advertised http.
func (s *suite) agentClient(t *testing.T, n *nodes.Node) *http.Client {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	// Ironic keeps the path of the file it stored the certificate in.
	path, _ := n.DriverInternalInfo["agent_verify_ca"].(string)
	if path == "" {
		return c
	}
	pem, err := os.ReadFile(s.services.HostPath(path))
	if err != nil {
		t.Fatalf("agent_verify_ca: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("agent_verify_ca %s holds no PEM certificate", path)
	}
	c.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	return c
}

// TestCommandsNeedToken is a fault: POSTs to the agent's command API
// without the token, or with a wrong one, get 401 and change nothing;
// GETs work without it while Ironic polls without it (21.4) and are
// refused once Ironic has polled with it (>= 29); the cleaning in
// progress still completes.
func TestCommandsNeedToken(t *testing.T) {
	s := need(t)
	ctx := t.Context()
	const mac = "52:54:e2:1c:00:01"
	n, steps, started, _, marked := s.slowManualClean(t, "e2e-token", mac, 8*time.Second)
	d := s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac, StepsDir: steps})
	a, _ := d.Start(slowClean)
	waitFile(t, started, stepTimeout)
	cur, err := s.ironic.WaitFor(ctx, n.UUID, 30*time.Second, "agent_url recorded", func(n *nodes.Node) bool {
		u, _ := n.DriverInternalInfo["agent_url"].(string)
		return u != ""
	})
	if err != nil {
		t.Fatal(err)
	}
	agentURL := cur.DriverInternalInfo["agent_url"].(string)
	hc := s.agentClient(t, cur)
	params := map[string]any{"step": map[string]any{"interface": "deploy", "step": "e2e_mark", "priority": 0}, "node": map[string]any{}, "ports": []any{}}
	for _, token := range []string{"", "not-the-token-0123456789abcdefghijklmnop"} {
		r, err := (&agentclient.Client{Base: agentURL, Token: token, HTTP: hc}).Post(ctx, "clean.execute_clean_step", params, true)
		if err != nil {
			t.Fatal(err)
		}
		if r.HTTPStatus != http.StatusUnauthorized {
			t.Errorf("POST /v1/commands/ with token %q: HTTP %d %s, want 401", token, r.HTTPStatus, r.Body)
		}
	}
	if s.series.TokenOnGET() {
		// Ironic >= 29 polls with the token; from its first such GET
		// (the agent logs it, token masked) a GET without one is refused,
		// as in IPA 10.2.
		if err := a.WaitLog(ctx, `query="agent_token=%2A%2A%2A"`, stepTimeout); err != nil {
			t.Fatal(err)
		}
		code, _, err := (&agentclient.Client{Base: agentURL, HTTP: hc}).List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusUnauthorized {
			t.Errorf("GET /v1/commands/ without token after Ironic polled with it: HTTP %d, want 401", code)
		}
	} else {
		s.checkTokenlessGET(t, hc, agentURL)
	}
	if exists(marked) {
		t.Error("a refused POST ran a step")
	}
	d.Wait("manageable", stepTimeout)
}

// checkTokenlessGET: Ironic 21.4 polls GET /v1/commands/ without the token,
// so a GET without one lists the commands, and the refused POSTs added
// none to Ironic's get_clean_steps and execute_clean_step.
func (s *suite) checkTokenlessGET(t *testing.T, hc *http.Client, agentURL string) {
	t.Helper()
	code, cmds, err := (&agentclient.Client{Base: agentURL, HTTP: hc}).List(t.Context())
	if code != http.StatusOK || err != nil {
		t.Errorf("GET /v1/commands/ without token: HTTP %d (%v), want 200 with the list", code, err)
	}
	// Ironic sent get_clean_steps and one execute_clean_step so far; a
	// refused POST must not have added anything.
	if len(cmds) != 2 {
		t.Errorf("commands after the refused POSTs = %+v, want Ironic's two", cmds)
	}
}
