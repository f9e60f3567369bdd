package ramdisk_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/overlay"
	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
	"github.com/ironic-go/ironic-agent/rescue"
)

// waitStep is a steps.d clean step, a script for the ramdisk's busybox
// shell, that hangs until a file appears, as a vendor tool waiting on
// hardware does; it prints what the file says as its result.
const waitStep = `#!/bin/sh
echo "wait_for_operator: waiting for /tmp/operator-go" >&2
while [ ! -e /tmp/operator-go ]; do sleep 1; done
echo "{\"released_by\": \"$(cat /tmp/operator-go)\"}"
`

const waitStepManifest = `{"step": "wait_for_operator", "interface": "deploy", "priority": 0, "clean": true, "timeout": 900}
`

// debugLoginStepVM boots a standalone agent with sshkey= and rootpwd= and
// an overlay adding waitStep and root's authorized_keys with a site's key,
// starts the step through the agent's API and, while it hangs, logs in
// over SSH (the step's process in ps, the agent's log file saying it runs;
// another key refused, the site's key taken) and on the serial console
// with the password; the login then releases the step, which succeeds.
func debugLoginStepVM(ctx context.Context, t *testing.T, rd *qemu.Ramdisk) {
	creds := newDebugCredentials(t)
	dir := t.TempDir()
	step, manifest := filepath.Join(dir, "wait_for_operator"), filepath.Join(dir, "wait_for_operator.json")
	if err := os.WriteFile(step, []byte(waitStep), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifest, []byte(waitStepManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	// A site's key in the overlay's root authorized_keys, beside sshkey='s.
	site := newDebugCredentials(t).signer
	keys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keys, append([]byte("# site\n"), ssh.MarshalAuthorizedKey(site.PublicKey())...), 0o600); err != nil {
		t.Fatal(err)
	}
	m, addr, api := debugMachine(t, rd, "ironic-agent-debugstep", creds.params()+" ipa-standalone=1 ipa-agent-token="+debugToken)
	bootWithOverlay(t, rd, &m, overlay.Spec{Files: []string{
		"etc/ironic-agent/steps.d/wait_for_operator=" + step,
		"etc/ironic-agent/steps.d/wait_for_operator.json=" + manifest,
		strings.TrimPrefix(rescue.AuthorizedKeysFile, "/") + "=" + keys,
	}})
	vm, fail := startVM(ctx, t, m)
	c := &agentclient.Client{Base: api, Token: debugToken}
	if err := c.WaitReady(ctx, 2*time.Second, func() bool { exited, _ := vm.Exited(); return exited }); err != nil {
		fail("agent API: %v", err)
	}
	r, err := c.Post(ctx, "clean.execute_clean_step", map[string]any{
		"step": map[string]any{"step": "wait_for_operator", "interface": "deploy", "priority": 0, "reboot_requested": false, "abortable": false},
		"node": map[string]any{"uuid": "4c616273-0000-4000-8000-0000000000d5"}, "ports": []any{}, "clean_version": nil}, false)
	if err != nil || r.HTTPStatus != 200 {
		fail("execute_clean_step: %v %+v", err, r)
	}
	if _, err := vm.WaitFor(ctx, logtext.Msg(agent.EventExecutingStep)); err != nil {
		fail("the step never started: %v", err)
	}

	// What an operator looks at first: the processes and the agent's log
	// (the step's process may be a moment behind the agent's line).
	out, _, err := sshRun(ctx, addr, creds.signer, "for i in $(seq 30); do ps | grep -q '[s]teps.d/wait_for_operator' && break; sleep 1; done; "+
		"ps; echo ===; cat "+logging.AgentLogFile)
	if err != nil {
		fail("SSH while the step runs: %v: %s", err, out)
	}
	ps, agentLog, _ := strings.Cut(out, "===")
	if !strings.Contains(ps, "steps.d/wait_for_operator") {
		t.Errorf("ps in the debug login does not show the step:\n%s", ps)
	}
	executing := ""
	for _, l := range strings.Split(agentLog, "\n") {
		if strings.Contains(l, logtext.Msg(agent.EventExecutingStep)) && strings.Contains(l, "wait_for_operator") {
			executing = l
		}
	}
	if executing == "" {
		t.Errorf("%s in the debug login does not say the step runs:\n%s", logging.AgentLogFile, agentLog)
	} else {
		t.Logf("%s: %s", logging.AgentLogFile, executing)
	}
	if _, _, err := sshRun(ctx, addr, creds.other, "true"); err == nil {
		t.Error("SSH with a key sshkey= does not hold logged in")
	}
	if out, _, err := sshRun(ctx, addr, site, "id -u"); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("SSH with the overlay's authorized_keys: %q %v", out, err)
	}
	if err := vm.Login(ctx, qemu.ConsoleLogin{Banner: debugBanner, User: "root", Password: debugPassword, Want: "SERIAL-42 as root"}); err != nil {
		fail("console login while the step runs: %v", err)
	}
	if _, cmds, err := c.List(ctx); err != nil || len(cmds) == 0 || cmds[len(cmds)-1].Status != "RUNNING" {
		fail("the step is not running after the logins: %v %+v", err, cmds)
	}

	// The operator lets the step go on.
	if out, _, err := sshRun(ctx, addr, creds.signer, "echo operator > /tmp/operator-go"); err != nil {
		fail("SSH: %v: %s", err, out)
	}
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer wcancel()
	done, err := c.WaitDone(wctx, "execute_clean_step", 2*time.Second)
	if err != nil {
		fail("%v", err)
	}
	if done.Status != "SUCCEEDED" || !strings.Contains(string(done.Result), `"released_by":"operator"`) && !strings.Contains(string(done.Result), `"released_by": "operator"`) {
		t.Errorf("the step ended %s with %s (error %s); want SUCCEEDED with its result", done.Status, done.Result, done.Error)
	}
	if l, ok := vm.Find(logtext.Msg(rescue.EventDebugSSHListening)); ok {
		t.Logf("%v %s", l.At, l.Text)
	}
}
