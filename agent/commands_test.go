package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/shacrypt"
	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/fakeironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logwatch"
	"github.com/ironic-go/ironic-agent/inventory"
)

const standaloneToken = "0123456789abcdef0123456789abcdef-standalone"

func standalone(t *testing.T, opts Options, flags map[string]string) *runningAgent {
	t.Helper()
	all := map[string]string{"standalone": "true", "agent_token": standaloneToken}
	for k, v := range flags {
		all[k] = v
	}
	return startAgent(t, all, opts)
}

// api is the agent's API as Ironic calls it: the token on every POST,
// none on GET (as Ironic before 29).
func (ra *runningAgent) api() *agentclient.Client {
	return &agentclient.Client{Base: ra.url, Token: standaloneToken, NoTokenOnList: true}
}

// call posts a command with wait=true and returns the HTTP status and
// the decoded reply.
func call(t *testing.T, ra *runningAgent, name string, params any) (int, map[string]any) {
	t.Helper()
	r, err := ra.api().Post(t.Context(), name, params, true)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("%s: HTTP %d %s", name, r.HTTPStatus, r.Body)
	}
	return r.HTTPStatus, out
}

// listCommands is the command list as name:status.
func listCommands(t *testing.T, ra *runningAgent) []string {
	t.Helper()
	code, cmds, err := ra.api().List(t.Context())
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/commands/: HTTP %d, %v", code, err)
	}
	var out []string
	for _, c := range cmds {
		out = append(out, c.Name+":"+c.Status)
	}
	return out
}

func TestStandbyCommands(t *testing.T) {
	m := &fakeMachine{}
	ra := standalone(t, Options{Hooks: Hooks{Machine: m, ShutdownDelay: time.Millisecond, BlockDevices: nil}}, nil)

	code, r := call(t, ra, "standby.get_partition_uuids", map[string]any{})
	if code != 200 || r["command_status"] != "SUCCEEDED" || string(mustJSON(r["command_result"])) != "{}" {
		t.Errorf("get_partition_uuids %d %v", code, r)
	}
	code, r = call(t, ra, "standby.sync", map[string]any{})
	if code != 200 || r["command_status"] != "SUCCEEDED" {
		t.Errorf("sync %d %v", code, r)
	}
	code, r = call(t, ra, "standby.power_off", map[string]any{})
	if code != 200 || r["command_status"] != "SUCCEEDED" || r["command_name"] != "power_off" {
		t.Errorf("power_off %d %v", code, r)
	}
	code, r = call(t, ra, "standby.run_image", map[string]any{})
	if code != 200 || r["command_status"] != "SUCCEEDED" {
		t.Errorf("run_image %d %v", code, r)
	}
	m.mu.Lock()
	got := strings.Join(m.actions, ",")
	m.mu.Unlock()
	if got != "sync,rtc,poweroff,rtc,reboot" { // IPA runs hwclock --systohc before each
		t.Errorf("machine actions %s", got)
	}
	code, r = call(t, ra, "standby.power_off", map[string]any{"force": true})
	if code != 400 {
		t.Errorf("unexpected params: %d %v", code, r)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestInstallBootloaderWholeDisk(t *testing.T) {
	ra := standalone(t, Options{}, nil)
	_, r := call(t, ra, "image.install_bootloader", map[string]any{"root_uuid": nil, "efi_system_part_uuid": nil, "prep_boot_part_uuid": nil, "target_boot_mode": "bios"})
	if r["command_status"] != "SUCCEEDED" || r["command_name"] != "install_bootloader" {
		t.Errorf("whole-disk BIOS: %v", r)
	}
	_, r = call(t, ra, "image.install_bootloader", map[string]any{"root_uuid": "c8b43f0e-0000-4000-8000-000000000001"})
	// GRUB for a partition image is off unless enable_bios_bootloader_install
	// (option or lookup config) allows it, as in IPA's CVE-2026-43003 fix.
	if r["command_status"] != "FAILED" || !strings.Contains(string(mustJSON(r["command_error"])), `"type":"InvalidImage"`) ||
		!strings.Contains(string(mustJSON(r["command_error"])), "disabled by CONF.enable_bios_bootloader_install") {
		t.Errorf("partition image: %v", r)
	}
	_, r = call(t, ra, "image.install_bootloader", map[string]any{"root_uuid": "c8b43f0e", "ignore_bootloader_failure": true})
	if r["command_status"] != "SUCCEEDED" {
		t.Errorf("ignored failure: %v", r)
	}
	if code, _ := call(t, ra, "image.install_bootloader", map[string]any{}); code != 400 {
		t.Errorf("missing root_uuid: %d", code)
	}
}

func TestCollectSystemLogs(t *testing.T) {
	initLog := filepath.Join(t.TempDir(), "init.log")
	const first = `time=2026-01-01T00:00:00.000Z level=INFO msg="ironic-agent init version" component=init boot_mac=52:54:00:12:34:56`
	if err := os.WriteFile(initLog, []byte(first+"\nsecond line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ra := standalone(t, Options{InitLog: initLog}, nil)
	_, r := call(t, ra, "log.collect_system_logs", map[string]any{})
	res, _ := r["command_result"].(map[string]any)
	logs, ok := res["system_logs"].(string)
	if !ok {
		t.Fatalf("collect_system_logs result has no system_logs string: %v", r)
	}
	raw, err := base64.StdEncoding.DecodeString(logs)
	if err != nil {
		t.Fatal(err)
	}
	// As Metal3 prints it: Ironic stores the bundle under this kind of
	// name, the watcher lists and prints it entry by entry.
	entries, out, err := logwatch.Read(t.Context(), t.TempDir(), "1be26c0b-03f2-4d2e-ae87-c02d7f33c123_cleaning_2026-01-01-00-00-00.tar.gz", raw)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		files[e.Name] = e.Text
	}
	if got, _, _ := strings.Cut(files["init.log"], "\n"); got != first {
		t.Errorf("init.log starts with %q; want the init's first line %q", got, first)
	}
	if !strings.Contains(files["agent.log"], "agent API listening") {
		t.Errorf("agent.log lacks the agent's own log: %q", files["agent.log"])
	}
	// The host's: md and the kernel log may be out of reach.
	problems, notes := logwatch.Problems(entries, "mdstat", "dmesg")
	for _, p := range problems {
		t.Error(p)
	}
	for _, n := range notes {
		t.Log(n)
	}
	if t.Failed() {
		t.Logf("the log watcher printed:\n%s", out)
	}
}

// Sub-commands of a flow are not recorded: Ironic only ever looks at the
// last entry of the list.
func TestFlowNestedInvisible(t *testing.T) {
	ra := standalone(t, Options{}, nil)
	_, r := call(t, ra, "flow.start_flow", map[string]any{"flow": []any{
		map[string]any{"standby.get_partition_uuids": map[string]any{}},
		map[string]any{"poll.get_hardware_info": map[string]any{}},
	}})
	if r["command_status"] != "SUCCEEDED" {
		t.Errorf("flow %v", r)
	}
	if got := strings.Join(listCommands(t, ra), ","); got != "start_flow:SUCCEEDED" {
		t.Errorf("command list %s", got)
	}
	_, r = call(t, ra, "flow.start_flow", map[string]any{"flow": []any{map[string]any{"image.install_bootloader": map[string]any{"root_uuid": "x"}}}})
	if r["command_status"] != "FAILED" || !strings.Contains(string(mustJSON(r["command_error"])), "image.install_bootloader was failed") {
		t.Errorf("failing flow %v", r)
	}
	if code, _ := call(t, ra, "flow.start_flow", map[string]any{"flow": []any{map[string]any{"nope.x": map[string]any{}}}}); code != 400 {
		t.Errorf("unknown sub-command: %d", code)
	}
}

// TestFinalizeRescue: Ironic's hashed password ($5$ by default, $6$) is
// stored as sent, a plaintext one (Ironic's fallback) hashed with
// SHA-256 as IPA does, anything that is not SHA-crypt refused; then the
// agent stops serving and hands the hash to Options.Rescue, at once and
// again after a restart of the agent.
func TestFinalizeRescue(t *testing.T) {
	const sha512 = "$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG."
	for _, tc := range []struct {
		name   string
		params map[string]any
		code   int
		// check is the password the stored hash must verify ("" for none).
		check string
	}{
		{"sha512", map[string]any{"rescue_password": sha512, "hashed": true}, 200, "secret"},
		{"sha256", map[string]any{"rescue_password": "$5$abcdefgh$gruCpC7VkOTspMQTTSAR8mtlO9Upms.fwqE5y16JVM.", "hashed": true}, 200, "secret"},
		{"plaintext", map[string]any{"rescue_password": "plain pw"}, 200, "plain pw"},
		{"not-sha-crypt", map[string]any{"rescue_password": "$6$salt$hash", "hashed": true}, 400, ""},
		{"yescrypt", map[string]any{"rescue_password": "$y$j9T$abc$def", "hashed": true}, 400, ""},
		{"missing", map[string]any{"hashed": true}, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			got := make(chan *shacrypt.Hash, 2)
			rescue := func(_ context.Context, h *shacrypt.Hash) error { got <- h; return nil }
			ra := standalone(t, Options{StateRoot: root, Rescue: rescue}, nil)
			code, r := call(t, ra, "rescue.finalize_rescue", tc.params)
			if code != tc.code {
				t.Fatalf("HTTP %d, want %d: %v", code, tc.code, r)
			}
			if tc.code != 200 {
				if _, err := os.Stat(filepath.Join(root, "etc/.rescued")); err == nil {
					t.Error("refused, but /etc/.rescued exists")
				}
				return
			}
			if r["command_status"] != "SUCCEEDED" {
				t.Fatalf("%v", r)
			}
			pw, _ := os.ReadFile(filepath.Join(root, "etc/ipa-rescue-config/ipa-rescue-password"))
			h, err := shacrypt.Parse(string(pw))
			if err != nil || !h.Verify([]byte(tc.check)) {
				t.Errorf("password file %q (%v) does not verify %q", pw, err, tc.check)
			}
			if tc.name == "plaintext" && h.Algorithm != shacrypt.SHA256 {
				t.Errorf("a plaintext password hashed with %v, IPA's is SHA-256", h.Algorithm)
			}
			if _, err := os.Stat(filepath.Join(root, "etc/.rescued")); err != nil {
				t.Errorf("no /etc/.rescued: %v", err)
			}
			select {
			case err := <-ra.done:
				ra.done <- err // for the cleanup
			case <-time.After(10 * time.Second):
				t.Fatal("agent still serving after finalize_rescue")
			}
			if h := <-got; h.String() != string(pw) {
				t.Errorf("Options.Rescue got %q, the file holds %q", h, pw)
			}
			// A restarted agent goes straight to the rescue logins.
			a, err := New(t.Context(), Options{Config: ra.agent.cfg, StateRoot: root, Rescue: rescue,
				SkipRAIDAssembly: true, DisableMultipath: true,
				Hooks: Hooks{Inventory: testInventory, Machine: &fakeMachine{}, Ready: func(string) { t.Error("a rescued agent served its API") }}})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if h := <-got; h.String() != string(pw) {
				t.Errorf("after a restart, Options.Rescue got %q", h)
			}
		})
	}
}

func TestPollCommands(t *testing.T) {
	ra := standalone(t, Options{}, nil)
	_, r := call(t, ra, "poll.get_hardware_info", map[string]any{})
	if !strings.Contains(string(mustJSON(r["command_result"])), testMAC) {
		t.Errorf("get_hardware_info %v", r)
	}
	_, r = call(t, ra, "poll.set_node_info", map[string]any{"node_info": map[string]any{"node": map[string]any{"uuid": "u-1"}, "config": map[string]any{"heartbeat_timeout": 10}}})
	if r["command_status"] != "SUCCEEDED" || ra.agent.Node()["uuid"] != "u-1" {
		t.Errorf("set_node_info %v", r)
	}
	// IPA's get_hardware_info and collect_system_logs take no arguments.
	for _, name := range []string{"poll.get_hardware_info", "log.collect_system_logs"} {
		if code, r := call(t, ra, name, map[string]any{"unexpected": 1}); code != 400 || !strings.Contains(string(mustJSON(r)), "unexpected parameters: unexpected") {
			t.Errorf("%s with a parameter: %d %v", name, code, r)
		}
	}
	// set_node_info is applied as a lookup reply: its config is kept and
	// a short token is refused with the lookup's warning.
	_, r = call(t, ra, "poll.set_node_info", map[string]any{"node_info": map[string]any{"node": map[string]any{"uuid": "u-2"},
		"config": map[string]any{"heartbeat_timeout": 10, "agent_skip_bmc_detect": true, "agent_token": "short"}}})
	if r["command_status"] != "SUCCEEDED" || ra.agent.Node()["uuid"] != "u-2" || !ra.agent.skipBMC() {
		t.Errorf("set_node_info with config %v, lookup config %v", r, ra.agent.LookupConfig())
	}
	if !strings.Contains(ra.log.String(), "ignoring an agent token shorter than 32 characters") {
		t.Errorf("no warning for the short token:\n%s", ra.log.String())
	}
	if got := ra.agent.tokens.Token(); got != standaloneToken {
		t.Errorf("token %q after a short one was offered", got)
	}
}

// Inspection before lookup: the UUID ironic-inspector returns goes to
// lookup as node_uuid; a node-not-found (400) does not stop the agent.
func TestInspectionThenLookup(t *testing.T) {
	for _, tc := range []struct {
		status   int
		wantUUID string
	}{{200, recordedNode}, {400, ""}} {
		// The inspector knows the node, or (as fakeironic does without
		// one) refuses the data with a 400.
		inspector := &fakeironic.Server{NodeUUID: tc.wantUUID}
		insp := httptest.NewServer(inspector)
		f, _, url := newIronic(t, false)
		startAgent(t, map[string]string{"api_url": url, "inspection_callback_url": insp.URL + "/v1/continue",
			"inspection_collectors": "default,logs,pci-devices,numa-topology"}, Options{})
		var lookup string
		for _, r := range f.Requests() {
			if r.Path == "/v1/lookup" {
				lookup = r.URI
			}
		}
		want := "/v1/lookup?addresses=52%3A54%3Aa9%3A7e%3A01%3A01"
		if tc.wantUUID != "" {
			want += "&node_uuid=" + tc.wantUUID
		}
		if lookup != want {
			t.Errorf("inspector %d: lookup %q, want %q", tc.status, lookup, want)
		}
		var posted map[string]any
		if reqs := inspector.Requests(); len(reqs) != 1 || reqs[0].Path != "/v1/continue" || reqs[0].Status != tc.status {
			t.Errorf("inspector %d: requests %+v", tc.status, reqs)
		} else if err := json.Unmarshal(reqs[0].Body, &posted); err != nil {
			t.Errorf("inspection data %.200s: %v", reqs[0].Body, err)
		}
		if posted["error"] != nil || posted["inventory"] == nil || posted["logs"] == nil {
			t.Errorf("inspection data error=%v inventory=%v logs? %v", posted["error"], posted["inventory"] != nil, posted["logs"] != nil)
		}
		insp.Close()
	}
}

func TestNormalizeBOOTIF(t *testing.T) {
	for in, want := range map[string]string{"01-52-54-00-12-34-56": "52:54:00:12:34:56", "52:54:00:12:34:56": "52:54:00:12:34:56", "52-54-00-AB-34-56": "52:54:00:ab:34:56", "": ""} {
		if got := NormalizeBOOTIF(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestStepCommandsThroughAPI(t *testing.T) {
	steps := t.TempDir()
	if err := os.WriteFile(filepath.Join(steps, "flash.json"), []byte(`{"interface": "management", "priority": 0, "deploy": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(steps, "flash"), []byte("#!/bin/sh\ncat >/dev/null\necho '{\"flashed\": 1}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ra := standalone(t, Options{}, map[string]string{"steps_dir": steps})
	node := map[string]any{"uuid": "n-1"}
	_, r := call(t, ra, "deploy.get_deploy_steps", map[string]any{"node": node, "ports": []any{}})
	res := string(mustJSON(r["command_result"]))
	if !strings.Contains(res, `"ExecStepsHardwareManager":[{"interface":"management","priority":0,"reboot_requested":false,"step":"flash"}]`) ||
		!strings.Contains(res, `"hardware_manager_version":{"exec_steps_hardware_manager":"1.0-`) ||
		!strings.Contains(res, `"generic_hardware_manager":"`+GenericManagerVersion+`"`) {
		t.Errorf("get_deploy_steps %s", res)
	}
	res2, ok := r["command_result"].(map[string]any)
	if !ok {
		t.Fatalf("get_deploy_steps result is not an object: %v", r)
	}
	versions := res2["hardware_manager_version"]

	step := map[string]any{"interface": "management", "step": "flash", "args": map[string]any{"x": 1}}
	_, r = call(t, ra, "deploy.execute_deploy_step", map[string]any{"step": step, "node": node, "ports": []any{}, "deploy_version": versions})
	if r["command_status"] != "SUCCEEDED" || string(mustJSON(r["command_result"])) != `{"deploy_result":{"flashed":1},"deploy_step":{"args":{"x":1},"interface":"management","step":"flash"}}` {
		t.Errorf("execute_deploy_step %v", r)
	}

	// A version Ironic recorded from another build: CLEAN_VERSION_MISMATCH,
	// even for a deploy step.
	_, r = call(t, ra, "deploy.execute_deploy_step", map[string]any{"step": step, "node": node, "ports": []any{},
		"deploy_version": map[string]any{"generic_hardware_manager": "1.2"}})
	e := string(mustJSON(r["command_error"]))
	if r["command_status"] != "CLEAN_VERSION_MISMATCH" || !strings.Contains(e, `"type":"VersionMismatch"`) || !strings.Contains(e, `"code":409`) {
		t.Errorf("mismatch %v", r)
	}

	// A step nobody implements fails the command with IPA's error.
	_, r = call(t, ra, "clean.execute_clean_step", map[string]any{"step": map[string]any{"interface": "deploy", "step": "erase_everything"},
		"node": node, "ports": []any{}, "clean_version": nil})
	if r["command_status"] != "FAILED" || !strings.Contains(string(mustJSON(r["command_error"])), "Could not find method: erase_everything") {
		t.Errorf("unknown step %v", r)
	}
	// A step without a name, or no step at all, is accepted and fails the
	// command, as in IPA (Ironic reads the failure back).
	_, r = call(t, ra, "clean.execute_clean_step", map[string]any{"step": map[string]any{"interface": "deploy"}, "node": node, "ports": []any{}})
	if e := string(mustJSON(r["command_error"])); r["command_status"] != "FAILED" ||
		!strings.Contains(e, `"type":"CommandExecutionError"`) || !strings.Contains(e, `Malformed clean_step, no \"step\" key: {\"interface\":\"deploy\"}`) {
		t.Errorf("step without a name %v", r)
	}
	_, r = call(t, ra, "deploy.execute_deploy_step", map[string]any{"node": node, "ports": []any{}})
	if e := string(mustJSON(r["command_error"])); r["command_status"] != "FAILED" ||
		!strings.Contains(e, `execute_deploy_step() missing 1 required positional argument: 'step'`) {
		t.Errorf("no step %v", r)
	}
	if code, _ := call(t, ra, "clean.get_clean_steps", map[string]any{"node": node}); code != 400 {
		t.Errorf("get_clean_steps without ports: %d", code)
	}
}

func TestWaitForRootDisk(t *testing.T) {
	ra := standalone(t, Options{}, map[string]string{"disk_wait_attempts": "3", "disk_wait_delay": "0.01"})
	if n := strings.Count(ra.log.String(), "waiting for a root disk candidate"); n != 2 || !strings.Contains(ra.log.String(), "no root disk candidate found; going on") {
		t.Errorf("%d waits; log:\n%s", n, ra.log.String())
	}
	big := func(ctx context.Context) (*inventory.Inventory, error) {
		i, err := testInventory(ctx)
		i.Disks = []inventory.Disk{{Name: "/dev/sda", Size: 8 << 30}}
		return i, err
	}
	ra = standalone(t, Options{Hooks: Hooks{Inventory: big}}, map[string]string{"disk_wait_attempts": "3", "disk_wait_delay": "0.01"})
	if strings.Contains(ra.log.String(), "root disk candidate") {
		t.Errorf("waited despite a disk of 8 GiB:\n%s", ra.log.String())
	}
}
