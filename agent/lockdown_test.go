package agent

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
)

// lockDown sends system.lockdown and checks what Ironic's
// AgentClient.lockdown checks: the command answers, then the agent stops
// answering; the process keeps running until stopped.
func lockDown(t *testing.T, ra *runningAgent) {
	t.Helper()
	code, r := call(t, ra, "system.lockdown", map[string]any{})
	if code != 200 || r["command_status"] != "SUCCEEDED" {
		t.Fatalf("system.lockdown: %d %v", code, r)
	}
	api := ra.api()
	api.HTTP = &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, err := api.List(t.Context()); err != nil {
			break // what Ironic waits for: AgentConnectionFailed
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent still answers 10 s after system.lockdown")
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-ra.done:
		t.Fatalf("a locked down agent returned from Run (the ramdisk's init would restart it): %v", err)
	case <-time.After(500 * time.Millisecond):
	}
}

func TestLockdownTouchesNoNICOfAnotherMachine(t *testing.T) {
	// The test agent's inventory is handed in: it is not this machine,
	// whose NICs the default lockdown must leave alone.
	ra := standalone(t, Options{}, nil)
	if code, _ := call(t, ra, "system.lockdown", map[string]any{"x": 1}); code != 400 {
		t.Errorf("lockdown with a parameter: %d", code)
	}
	lockDown(t, ra)
	if !strings.Contains(ra.log.String(), "lockdown: the inventory is not this machine's: no interface brought down") {
		t.Errorf("no log line saying no NIC was touched:\n%s", ra.log.String())
	}
	ra.stop()
}

func TestLockdownBringsNICsDownInANamespace(t *testing.T) {
	netnstest.RequireRoot(t)
	id := netnstest.ID(t)
	ns := netnstest.NewNetns(t, "ialock"+id)
	peer := netnstest.NewNetns(t, "ialockp"+id)
	veth, veth2 := "lkv"+id, "lkw"+id
	ns.Veth(veth, peer, "lkp"+id)
	ns.Veth(veth2, peer, "lkq"+id)
	calls := 0
	ra := standalone(t, Options{Hooks: Hooks{LockdownNICs: func(context.Context) error {
		calls++
		// "nope" stands for a NIC that vanished: logged, the others still go down.
		return netnstest.Do(ns.Name, func() error { return LinksDown([]string{veth, "nope" + id, veth2}, t.Logf) })
	}}}, nil)
	start := time.Now()
	lockDown(t, ra)
	t.Logf("lockdown to unreachable: %v", time.Since(start))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(ra.log.String(), "could not bring every interface down") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, l := range []string{veth, veth2} {
		out := ns.IP("-o", "link", "show", l)
		if flags := out[strings.Index(out, "<"):strings.Index(out, ">")]; strings.Contains(flags, ",UP") || strings.Contains(flags, "<UP") {
			t.Errorf("%s still up after lockdown: %s", l, out)
		}
	}
	if !strings.Contains(ra.log.String(), "bring interface nope"+id+" down") {
		t.Errorf("the missing NIC's failure is not logged:\n%s", ra.log.String())
	}
	if calls != 1 {
		t.Errorf("NICs brought down %d times", calls)
	}
	ra.stop()
}
