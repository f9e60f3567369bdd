package lifecycle

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

const nodeUUID = "7d0c2d8e-0000-4000-8000-000000000001"

// provisionAPI answers the two calls the driver makes of Ironic, a node's
// GET and its provision-state PUT: a request moves the node to the state
// in which Ironic waits for a ramdisk (or, for a change none serves, to
// its end state); a ramdisk's boot (serve) moves it to the end state.
type provisionAPI struct {
	mu       sync.Mutex
	state    string
	requests []string // the targets asked for, in order
}

func (p *provisionAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/nodes/"+nodeUUID):
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"uuid": nodeUUID, "provision_state": p.state})
	case r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/nodes/"+nodeUUID+"/states/provision"):
		var body struct {
			Target nodes.TargetProvisionState `json:"target"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p.requests = append(p.requests, string(body.Target))
		wait, done, _ := States(body.Target)
		p.state = done
		if wait != "" {
			p.state = wait
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		http.NotFound(w, r)
	}
}

// serve is a ramdisk finishing the step Ironic waits in.
func (p *provisionAPI) serve() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, target := range []nodes.TargetProvisionState{nodes.TargetInspect, nodes.TargetClean, nodes.TargetActive} {
		if wait, done, _ := States(target); wait == p.state {
			p.state = done
			if target == nodes.TargetClean && len(p.requests) > 0 && p.requests[len(p.requests)-1] == string(nodes.TargetProvide) {
				p.state = "available"
			}
			return
		}
	}
}

func (p *provisionAPI) current() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// boot is one fake ramdisk boot: it finishes the step it was booted for
// and runs until killed.
type boot struct {
	n         int
	bootedIn  string // the node's state when it booted
	done      chan struct{}
	killOnce  sync.Once
	killState string // the node's state when it was killed
	api       *provisionAPI
}

func (b *boot) Done() <-chan struct{} { return b.done }

func (b *boot) Kill() {
	b.killOnce.Do(func() {
		b.killState = b.api.current()
		close(b.done)
	})
}

// newDriver is a Driver of a node in manageable on a provisionAPI, whose
// Boot records each boot.
func newDriver(t *testing.T) (*Driver[*boot], *provisionAPI) {
	t.Helper()
	api := &provisionAPI{state: "manageable"}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	c, err := ironic.NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver[*boot]{T: t, Ctx: t.Context(), Ironic: c, Node: nodeUUID}
	d.Boot = func() (*boot, error) {
		b := &boot{n: len(d.Boots()) + 1, bootedIn: api.current(), done: make(chan struct{}), api: api}
		api.serve()
		return b, nil
	}
	return d, api
}

// TestDriverBootsOncePerStep: with fake power each step that Ironic
// serves with a ramdisk gets a boot of its own, made once Ironic waits for
// it, after the previous boot ended (before the request, as a power-off);
// a change no ramdisk serves boots nothing.
func TestDriverBootsOncePerStep(t *testing.T) {
	d, api := newDriver(t)
	inspect := d.Inspect(time.Minute)
	if !inspect.Booted || inspect.Ramdisk.bootedIn != "inspect wait" || inspect.Node.ProvisionState != "manageable" {
		t.Fatalf("inspection: booted %v in %q, ended in %q; want a boot in inspect wait, manageable", inspect.Booted, inspect.Ramdisk.bootedIn, inspect.Node.ProvisionState)
	}
	clean := d.Clean(time.Minute, nodes.CleanStep{Interface: nodes.InterfaceDeploy, Step: "erase_devices_metadata"})
	if clean.Ramdisk == inspect.Ramdisk || clean.Ramdisk.bootedIn != "clean wait" {
		t.Errorf("cleaning: served by boot %d (booted in %q); want a new boot in clean wait", clean.Ramdisk.n, clean.Ramdisk.bootedIn)
	}
	if inspect.Ramdisk.killState != "manageable" {
		t.Errorf("the inspection boot ended with the node in %q, want manageable: before the cleaning request", inspect.Ramdisk.killState)
	}
	if n := d.Change(nodes.ProvisionStateOpts{Target: nodes.TargetManage}, time.Minute); n.ProvisionState != "manageable" || len(d.Boots()) != 2 {
		t.Errorf("manage: %q after %d boots; want manageable, no boot of its own", n.ProvisionState, len(d.Boots()))
	}
	if got := strings.Join(api.requests, ","); got != "inspect,clean,manage" {
		t.Errorf("requests %s", got)
	}
}

// TestDriverFastTrackAheadReboot: fast track keeps the running boot for
// the next step; BootAhead's boot serves the next step; Reboot ends the
// last boot and makes another at once.
func TestDriverFastTrackAheadReboot(t *testing.T) {
	d, api := newDriver(t)
	d.FastTrack = true
	first := d.Inspect(time.Minute).Ramdisk
	// Fast track: the running ramdisk serves cleaning; the driver waits
	// for nothing but the end state (the test's ramdisk finished its
	// first step only, so serve stands in for its next one).
	r, booted := d.Start(nodes.ProvisionStateOpts{Target: nodes.TargetProvide})
	if !booted || r != first || len(d.Boots()) != 1 {
		t.Fatalf("fast track: step served by boot %d of %d; want the first, still running", r.n, len(d.Boots()))
	}
	api.serve()
	d.Wait("available", time.Minute)

	d.FastTrack = false
	ahead := d.BootAhead()
	if first.killState == "" {
		t.Error("BootAhead left the previous boot running")
	}
	api.mu.Lock()
	api.state = "manageable"
	api.mu.Unlock()
	r, _ = d.Start(nodes.ProvisionStateOpts{Target: nodes.TargetClean})
	if r != ahead || len(d.Boots()) != 2 {
		t.Errorf("after BootAhead: step served by boot %d of %d; want the boot made ahead", r.n, len(d.Boots()))
	}
	again := d.Reboot()
	if ahead.killState == "" || again == ahead || len(d.Boots()) != 3 {
		t.Errorf("Reboot: previous boot ended %v, %d boots; want it ended and a third", ahead.killState != "", len(d.Boots()))
	}
}

// TestDriverTryFormsReturnErrors: without T, the Try forms return what
// would fail the test: a boot that does not start, an unknown target,
// a wait that times out.
func TestDriverTryFormsReturnErrors(t *testing.T) {
	d, api := newDriver(t)
	d.T = nil
	d.Boot = func() (*boot, error) { return nil, errors.New("no QEMU") }
	if _, err := d.TryTo(nodes.ProvisionStateOpts{Target: nodes.TargetInspect}, time.Minute); err == nil || !strings.Contains(err.Error(), "no QEMU") {
		t.Errorf("a failed boot: %v; want its error", err)
	}
	if len(d.Boots()) != 0 {
		t.Errorf("%d boots after a failed one; want none", len(d.Boots()))
	}
	if _, err := d.TryTo(nodes.ProvisionStateOpts{Target: "bogus"}, time.Minute); err == nil {
		t.Error("an unknown target: no error")
	}
	// Nothing serves the inspection: the node stays in inspect wait.
	if n, err := d.TryWait("manageable", time.Second); err == nil || n == nil || n.ProvisionState != "inspect wait" {
		t.Errorf("a wait that times out: node %v, %v; want the node in inspect wait and an error", n, err)
	}
	if got := strings.Join(api.requests, ","); got != "inspect" {
		t.Errorf("requests %s; want only the inspection (an unknown target is not asked for)", got)
	}
}

// TestDriverCheckEndsTheWait: Check's error about the serving boot ends
// the wait before its timeout, and is the step's error; a boot the step
// did not make is not checked.
func TestDriverCheckEndsTheWait(t *testing.T) {
	d, api := newDriver(t)
	d.FastTrack = true
	var checked []*boot
	d.Check = func(b *boot) error {
		checked = append(checked, b)
		return errors.New("out of memory")
	}
	// The inspection's boot serves it at once: the wait ends before
	// the first check.
	first := d.Inspect(time.Minute).Ramdisk
	if len(checked) != 0 {
		t.Errorf("%d checks of a step done before the first; want none", len(checked))
	}
	// Fast track: the running boot serves cleaning, which never ends
	// here; the check's error ends the wait.
	start := time.Now()
	s, err := d.TryTo(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, time.Minute)
	if err == nil || err.Error() != "out of memory" || s.Ramdisk != first {
		t.Errorf("cleaning: %v, boot %v; want the check's error about the first boot", err, s.Ramdisk)
	}
	if took := time.Since(start); took >= time.Minute {
		t.Errorf("the check ended the wait after %s, the timeout", took)
	}
	if len(checked) != 1 || checked[0] != first {
		t.Errorf("checked %v; want the first boot once", checked)
	}
	// Manage boots nothing: nothing to check, Ironic's answer stands.
	api.mu.Lock()
	api.state = "available"
	api.mu.Unlock()
	checked = nil
	if _, err := d.TryChange(nodes.ProvisionStateOpts{Target: nodes.TargetManage}, time.Minute); err != nil || len(checked) != 0 {
		t.Errorf("manage: %v, %d checks; want no error, none", err, len(checked))
	}
}

// TestStatesKnowsEveryTarget: each target the driver asks for has an end
// state, and the ones a ramdisk serves a state Ironic waits for it in.
func TestStatesKnowsEveryTarget(t *testing.T) {
	for _, target := range []nodes.TargetProvisionState{nodes.TargetManage, nodes.TargetInspect, nodes.TargetProvide, nodes.TargetClean,
		nodes.TargetActive, nodes.TargetService, nodes.TargetRescue, nodes.TargetUnrescue, nodes.TargetAdopt, nodes.TargetDeleted} {
		wait, done, ok := States(target)
		if !ok || done == "" {
			t.Errorf("%s: no end state", target)
		}
		if ramdisk := target != nodes.TargetManage && target != nodes.TargetUnrescue && target != nodes.TargetAdopt; ramdisk != (wait != "") {
			t.Errorf("%s: waits for a ramdisk in %q", target, wait)
		}
	}
	if _, _, ok := States("bogus"); ok {
		t.Error("an unknown target has states")
	}
}

// ironicFailureStates are the FAILURE_STATES of Ironic's
// ironic/common/states.py (2026.1) and "error", a failed tear-down's.
var ironicFailureStates = []string{"deploy failed", "clean failed", "inspect failed", "rescue failed",
	"unrescue failed", "adopt failed", "service failed", "error"}

// TestEndedStopsOnFailure: Ended returns the node in the change's end
// state or in a failure state ("service failed" after a failed service
// step), and a wait for another state ends in each of Ironic's failure
// states with an error naming it rather than at its timeout.
func TestEndedStopsOnFailure(t *testing.T) {
	d, api := newDriver(t)
	api.state = "active"
	d.Request(nodes.ProvisionStateOpts{Target: nodes.TargetService})
	api.mu.Lock()
	api.state = "service failed"
	api.mu.Unlock()
	if n := d.Ended(nodes.TargetService, time.Minute); n.ProvisionState != "service failed" {
		t.Errorf("Ended after a failed servicing: %q, want \"service failed\"", n.ProvisionState)
	}
	api.mu.Lock()
	api.state = "active"
	api.mu.Unlock()
	if n := d.Ended(nodes.TargetService, time.Minute); n.ProvisionState != "active" {
		t.Errorf("Ended after servicing: %q, want active", n.ProvisionState)
	}

	for _, state := range ironicFailureStates {
		if !ironic.FailureState(state) {
			t.Errorf("%q is not a failure state", state)
		}
		api.mu.Lock()
		api.state = state
		api.mu.Unlock()
		_, err := d.Ironic.WaitState(t.Context(), nodeUUID, "active", time.Minute)
		if err == nil || !strings.Contains(err.Error(), `reached "`+state+`"`) {
			t.Errorf("waiting for active in %q: %v; want an error naming %q at once", state, err, state)
		}
	}
	for _, state := range []string{"active", "service wait", "servicing", "service hold", "clean hold", "manageable", "enroll"} {
		if ironic.FailureState(state) {
			t.Errorf("%q counts as a failure state", state)
		}
	}
}
