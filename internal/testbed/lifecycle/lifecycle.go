// Package lifecycle is the test bed's one lifecycle driver: it takes a
// node enrolled in Ironic through its provision states, asking Ironic for
// each change and booting the ramdisk that serves it the way Ironic's
// power-on would. The ramdisk is whatever answers as the agent: a QEMU
// machine (e2e/vm, whose power may also be a simulated BMC's), the agent
// binary in namespaces of its own (e2e), or the stand-in
// (internal/testbed/standin). A tool (tools/bootbench) drives it too,
// through the forms that return their errors.
package lifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

// Ramdisk is one boot of the ramdisk.
type Ramdisk interface {
	// Done is closed once the boot has ended.
	Done() <-chan struct{}
	// Kill ends the boot at once, as a power-off would, and returns once
	// it has ended.
	Kill()
}

// States are, for a provision-state change to target, the state in which
// Ironic waits for the ramdisk it boots for it (empty: it boots none) and
// the state the change ends in; ok is false for a target it does not know.
func States(target nodes.TargetProvisionState) (wait, done string, ok bool) {
	switch target {
	case nodes.TargetManage:
		return "", "manageable", true
	case nodes.TargetInspect:
		return "inspect wait", "manageable", true
	case nodes.TargetProvide:
		// With automated cleaning off the node goes straight to
		// available, booting nothing: Change waits for that.
		return "clean wait", "available", true
	case nodes.TargetClean:
		return "clean wait", "manageable", true
	case nodes.TargetActive:
		return "wait call-back", "active", true
	case nodes.TargetService:
		return "service wait", "active", true
	case nodes.TargetRescue:
		return "rescue wait", "rescue", true
	case nodes.TargetUnrescue:
		return "", "active", true
	case nodes.TargetAdopt:
		return "", "active", true
	case nodes.TargetDeleted:
		// Undeploy: automated cleaning, as Provide.
		return "clean wait", "available", true
	}
	return "", "", false
}

// Driver takes one enrolled node through Ironic's provision states. Each
// step asks Ironic for a target, boots the ramdisk once Ironic waits for
// one (when Boot is set: fake power) and waits for the state the step ends
// in.
//
// The methods without an error result fail the test through T; each has
// a Try form that returns the error instead, for a flow to which a failed
// step is an outcome (the smallest memory that completes a deploy) and
// for a tool, whose Driver has no T.
type Driver[R Ramdisk] struct {
	T      testing.TB // nil in a tool: it calls only the Try forms
	Ctx    context.Context
	Ironic *ironic.Client
	Node   string // the node's UUID

	// Boot boots the ramdisk, as a power-on would: the driver calls it
	// once Ironic waits for a ramdisk, never before (a ramdisk up before
	// Ironic "rebooted" the node could be handed an agent token the reboot
	// then wipes). Nil when something else powers the machine on (a BMC
	// on Ironic's request): the driver then boots nothing.
	Boot func() (R, error)
	// Stopped, when set, runs each time Stop has ended the last boot:
	// what Boot set up for that boot ends with it.
	Stopped func()
	// Before, when set, runs before each request, with the request: what
	// the power side does before Ironic acts (a BMC's power-on count, the
	// kernel parameters its next boot gets).
	Before func(opts nodes.ProvisionStateOpts)
	// Check, when set, is asked every CheckEvery about the boot serving
	// the step while the driver waits for the step's state: an error (the
	// console says the machine ran out of memory, the machine stopped)
	// ends the wait with that error instead of at the timeout. Only boots
	// the driver made or kept for the step are checked.
	Check func(r R) error
	// FastTrack: a ramdisk still running serves the next step, as
	// Ironic's [deploy]fast_track has it; Boot then boots only the first.
	FastTrack bool

	boots []R
	// ahead is a boot made before the next request (BootAhead), which
	// serves that step.
	ahead     R
	haveAhead bool
	// serving is the boot that serves the step under way, which Check
	// looks at.
	serving     R
	haveServing bool
}

// CheckEvery is how often a wait asks Driver.Check.
const CheckEvery = 2 * time.Second

// Step is what one provision-state change gave.
type Step[R Ramdisk] struct {
	// Ramdisk is the boot that served the step, when Booted; with Boot
	// nil the driver boots nothing and Booted is false.
	Ramdisk R
	Booted  bool
	// Took is the time from the request to the end state.
	Took time.Duration
	// Node is the node in its end state.
	Node *nodes.Node
}

// Inspect is inspection, ending in manageable.
func (d *Driver[R]) Inspect(timeout time.Duration) Step[R] {
	d.T.Helper()
	return d.To(nodes.ProvisionStateOpts{Target: nodes.TargetInspect}, timeout)
}

// Provide is provide: automated cleaning, ending in available. With
// automated cleaning off no ramdisk boots: ask with Change instead.
func (d *Driver[R]) Provide(timeout time.Duration) Step[R] {
	d.T.Helper()
	return d.To(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, timeout)
}

// Clean is a manual cleaning with steps, ending in manageable.
func (d *Driver[R]) Clean(timeout time.Duration, steps ...nodes.CleanStep) Step[R] {
	d.T.Helper()
	return d.To(nodes.ProvisionStateOpts{Target: nodes.TargetClean, CleanSteps: steps}, timeout)
}

// Deploy is a deploy with deploy steps besides Ironic's own, ending in
// active.
func (d *Driver[R]) Deploy(timeout time.Duration, steps ...nodes.DeployStep) Step[R] {
	d.T.Helper()
	return d.To(nodes.ProvisionStateOpts{Target: nodes.TargetActive, DeploySteps: steps}, timeout)
}

// Change asks Ironic for opts and waits up to timeout for the state the
// change ends in, booting nothing: for a change no ramdisk serves (manage;
// provide or undeploy with automated cleaning off).
func (d *Driver[R]) Change(opts nodes.ProvisionStateOpts, timeout time.Duration) *nodes.Node {
	d.T.Helper()
	n, err := d.TryChange(opts, timeout)
	d.fatal(err)
	return n
}

// TryChange is Change returning its error.
func (d *Driver[R]) TryChange(opts nodes.ProvisionStateOpts, timeout time.Duration) (*nodes.Node, error) {
	_, done, err := d.request(opts)
	if err != nil {
		return nil, err
	}
	return d.Ironic.WaitState(d.Ctx, d.Node, done, timeout)
}

// To asks Ironic for opts and waits up to timeout for the state the
// change ends in.
func (d *Driver[R]) To(opts nodes.ProvisionStateOpts, timeout time.Duration) Step[R] {
	d.T.Helper()
	s, err := d.TryTo(opts, timeout)
	d.fatal(err)
	return s
}

// TryTo is To returning its error; the step holds what the driver got
// before it (the boot it made, the node when the wait ended).
func (d *Driver[R]) TryTo(opts nodes.ProvisionStateOpts, timeout time.Duration) (Step[R], error) {
	_, done, ok := States(opts.Target)
	if !ok {
		return Step[R]{}, d.unknown(opts.Target)
	}
	return d.TryUntil(opts, done, timeout)
}

// Until is To waiting for state instead of the state the change ends in:
// the failure state a scenario expects ("clean failed" after a step that
// fails), or any state Ironic passes through.
func (d *Driver[R]) Until(opts nodes.ProvisionStateOpts, state string, timeout time.Duration) Step[R] {
	d.T.Helper()
	s, err := d.TryUntil(opts, state, timeout)
	d.fatal(err)
	return s
}

// TryUntil is Until returning its error, as TryTo.
func (d *Driver[R]) TryUntil(opts nodes.ProvisionStateOpts, state string, timeout time.Duration) (Step[R], error) {
	start := time.Now()
	r, booted, err := d.TryStart(opts)
	s := Step[R]{Ramdisk: r, Booted: booted}
	if err != nil {
		return s, err
	}
	s.Node, err = d.TryWait(state, timeout)
	s.Took = time.Since(start)
	return s, err
}

// Start asks Ironic for opts and, with Boot set, boots the ramdisk once
// Ironic waits for it (unless fast track has one running, or BootAhead
// made one), returning it; it does not wait for the end state, for a
// scenario that watches the step itself (what Ironic shows only while the
// ramdisk works, a failure it expects). Without Boot, or for a change no
// ramdisk serves, it boots nothing and booted is false.
func (d *Driver[R]) Start(opts nodes.ProvisionStateOpts) (r R, booted bool) {
	d.T.Helper()
	r, booted, err := d.TryStart(opts)
	d.fatal(err)
	return r, booted
}

// TryStart is Start returning its error.
func (d *Driver[R]) TryStart(opts nodes.ProvisionStateOpts) (r R, booted bool, err error) {
	wait, _, ok := States(opts.Target)
	if !ok {
		return r, false, d.unknown(opts.Target)
	}
	boots := d.Boot != nil && wait != ""
	reuse, ok := d.Running()
	if !d.FastTrack {
		ok = false
	}
	if boots && d.haveAhead {
		reuse, ok = d.ahead, true
		d.ahead, d.haveAhead = *new(R), false
	}
	if boots && !ok {
		// The last boot ends before the request, as Ironic's power-off
		// would end it: its agent could otherwise look the node up again
		// and take the token meant for the next boot.
		d.Stop()
	}
	if _, _, err := d.request(opts); err != nil {
		return r, false, err
	}
	if !boots {
		return r, false, nil
	}
	if !ok {
		if _, err := d.Ironic.WaitState(d.Ctx, d.Node, wait, 2*time.Minute); err != nil {
			return r, false, err
		}
		if reuse, err = d.boot(); err != nil {
			return r, false, err
		}
	}
	d.serving, d.haveServing = reuse, true
	return reuse, true, nil
}

// Wait waits up to timeout for the node to reach state, for a scenario
// that began its step with Start.
func (d *Driver[R]) Wait(state string, timeout time.Duration) *nodes.Node {
	d.T.Helper()
	n, err := d.TryWait(state, timeout)
	d.fatal(err)
	return n
}

// Ended waits up to timeout for the change to target, already asked for
// (Request, Start), to end: in the state it ends in or in one of Ironic's
// failure states ("service failed" after a service step that fails). It
// returns the node in whichever it reached, for a scenario that expects a
// failure and checks which end it got; only the timeout fails the test.
func (d *Driver[R]) Ended(target nodes.TargetProvisionState, timeout time.Duration) *nodes.Node {
	d.T.Helper()
	_, done, ok := States(target)
	if !ok {
		d.T.Fatalf("lifecycle %s: no known end state for target %q", d.Node, target)
	}
	n, err := d.Ironic.WaitFor(d.Ctx, d.Node, timeout, fmt.Sprintf("provision_state %q or a failure state", done), func(n *nodes.Node) bool {
		return n.ProvisionState == done || ironic.FailureState(n.ProvisionState)
	})
	if err != nil {
		d.T.Fatal(err)
	}
	return n
}

// TryWait is Wait returning its error: Ironic's (a failure state, the
// timeout) or Check's about the boot serving the step.
func (d *Driver[R]) TryWait(state string, timeout time.Duration) (*nodes.Node, error) {
	if d.Check == nil || !d.haveServing {
		return d.Ironic.WaitState(d.Ctx, d.Node, state, timeout)
	}
	ctx, cancel := context.WithCancel(d.Ctx)
	defer cancel()
	type result struct {
		n   *nodes.Node
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := d.Ironic.WaitState(ctx, d.Node, state, timeout)
		done <- result{n, err}
	}()
	tick := time.NewTicker(CheckEvery)
	defer tick.Stop()
	for {
		select {
		case res := <-done:
			return res.n, res.err
		case <-tick.C:
		}
		if err := d.Check(d.serving); err != nil {
			cancel()
			res := <-done
			return res.n, err
		}
	}
}

// Reboot ends the last boot, as a power cycle would, and boots the
// ramdisk again at once: the same step goes on with the new boot (a
// reboot a step asked for, a crash and the boot after it).
func (d *Driver[R]) Reboot() R {
	d.T.Helper()
	if d.Boot == nil {
		d.T.Fatalf("lifecycle %s: Reboot without Boot: the machine boots on its BMC's power-on", d.Node)
	}
	d.Stop()
	r, err := d.boot()
	d.fatal(err)
	if d.haveServing {
		d.serving = r
	}
	return r
}

// Request asks Ironic for opts, after Before; it returns the state in
// which Ironic waits for the ramdisk (empty: none boots) and the one the
// change ends in.
func (d *Driver[R]) Request(opts nodes.ProvisionStateOpts) (wait, done string) {
	d.T.Helper()
	wait, done, err := d.request(opts)
	d.fatal(err)
	return wait, done
}

// request is Request returning its error.
func (d *Driver[R]) request(opts nodes.ProvisionStateOpts) (wait, done string, err error) {
	wait, done, ok := States(opts.Target)
	if !ok {
		return "", "", d.unknown(opts.Target)
	}
	if d.Before != nil {
		d.Before(opts)
	}
	// A new step: what served the last one is not checked in this one's
	// waits (TryStart sets the boot that serves it).
	d.serving, d.haveServing = *new(R), false
	return wait, done, d.Ironic.Provision(d.Ctx, d.Node, opts)
}

// boot boots the ramdisk with Boot and adds it to Boots.
func (d *Driver[R]) boot() (R, error) {
	r, err := d.Boot()
	if err != nil {
		return r, fmt.Errorf("lifecycle %s: boot the ramdisk: %w", d.Node, err)
	}
	d.boots = append(d.boots, r)
	return r, nil
}

func (d *Driver[R]) unknown(target nodes.TargetProvisionState) error {
	return fmt.Errorf("lifecycle %s: no known end state for target %q", d.Node, target)
}

// fatal fails the test with err, if any.
func (d *Driver[R]) fatal(err error) {
	if err != nil {
		d.T.Helper()
		d.T.Fatal(err)
	}
}

// Running is the last boot if it still runs.
func (d *Driver[R]) Running() (R, bool) {
	var none R
	if len(d.boots) == 0 {
		return none, false
	}
	r := d.boots[len(d.boots)-1]
	select {
	case <-r.Done():
		return none, false
	default:
		return r, true
	}
}

// BootAhead boots the ramdisk now, before the next request, and returns
// it: a machine already up when Ironic asks, whose agent meets the node's
// change while it runs (what a scenario does to it first is then under
// the step). That boot serves the next step, which boots nothing else.
func (d *Driver[R]) BootAhead() R {
	d.T.Helper()
	if d.Boot == nil {
		d.T.Fatalf("lifecycle %s: BootAhead without Boot: the machine boots on Ironic's power-on", d.Node)
	}
	d.Stop()
	r, err := d.boot()
	d.fatal(err)
	d.ahead, d.haveAhead = r, true
	return r
}

// Stop ends the last boot the driver made, as a power-off would, then
// runs Stopped.
func (d *Driver[R]) Stop() {
	if len(d.boots) > 0 && d.Boot != nil {
		d.boots[len(d.boots)-1].Kill()
	}
	if d.Stopped != nil {
		d.Stopped()
	}
}

// Record adds a boot the driver did not make (a BMC's power-on) to Boots.
func (d *Driver[R]) Record(r R) { d.boots = append(d.boots, r) }

// Boots are the ramdisk boots so far, the last one last.
func (d *Driver[R]) Boots() []R { return d.boots }
