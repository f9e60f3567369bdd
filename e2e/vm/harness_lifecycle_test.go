package vm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// The lifecycle driver: every scenario moves its node through Ironic with
// one lifecycle, whatever holds the machine's power and however the
// ramdisk boots.

// power is what turns the machine on when Ironic powers the node on.
type power int

const (
	// fakePower is Ironic's fake power interface, which powers nothing:
	// the driver boots the machine once Ironic waits for the ramdisk, and
	// stops the previous boot first (as a real power-off would have).
	fakePower power = iota
	// ipmiPower is ipmi_sim behind Ironic's ipmi hardware type: Ironic's
	// power-ons start the machine.
	ipmiPower
	// redfishPower is bmcsim's Redfish BMC behind Ironic's redfish
	// hardware type.
	redfishPower
)

func (p power) String() string {
	switch p {
	case fakePower:
		return "fake power"
	case ipmiPower:
		return "IPMI"
	case redfishPower:
		return "Redfish"
	}
	return fmt.Sprintf("power(%d)", int(p))
}

// bootMethod is how the ramdisk reaches the machine.
type bootMethod int

const (
	// kernelBoot hands QEMU the ramdisk's kernel and initramfs (behind
	// ipmi_sim: the kernel stands in for a network boot).
	kernelBoot bootMethod = iota
	// netBoot is a PXE or iPXE boot from the provisioning network, through
	// the files Ironic's pxe or ipxe boot interface wrote.
	netBoot
	// virtualMedia is the ISO Ironic built, inserted by the BMC.
	virtualMedia
)

func (b bootMethod) String() string {
	switch b {
	case kernelBoot:
		return "kernel boot"
	case netBoot:
		return "network boot"
	case virtualMedia:
		return "virtual media"
	}
	return fmt.Sprintf("bootMethod(%d)", int(b))
}

// bmcPower is what the driver and the tests read of a simulated BMC's power
// (bmcsim.IPMISim, bmcsim.RedfishBMC).
type bmcPower interface {
	On() bool
	Boots() int
	VMOfBoot(n int) *qemu.VM
	Events() []string
}

// kernelArgsBMC is a BMC whose network boot hands QEMU the ramdisk's
// kernel (bmcsim.IPMISim on a machine without PXE NICs), with the kernel
// parameters it is given.
type kernelArgsBMC interface {
	SetKernelArgs(append string)
}

// lifecycle takes one enrolled node through Ironic's provision states.
// Each step asks Ironic for a target, has the ramdisk boot the way power
// and boot say, and waits for the state the step ends in.
type lifecycle struct {
	t      *testing.T
	ctx    context.Context
	ironic *ironic.Client
	node   string // the node's UUID
	power  power
	boot   bootMethod

	// machine is what fakePower boots; its Append may change between
	// steps (an inspection boot's parameters are not a deploy's). With a
	// BMC and kernelBoot, a non-empty Append is handed to the BMC before
	// each request: the kernel parameters its next network boot's stand-in
	// gets, as Ironic's PXE configuration would give them.
	machine qemu.Machine
	// options, when set, gives each fakePower boot its QEMU options (a
	// tap, a switch's end) and what to do once that boot is over; nil
	// boots with none.
	options func(m *qemu.Machine) (qemu.Options, func())
	// fastTrack: a ramdisk still running serves the next step, as Ironic's
	// [deploy]fast_track has it; fakePower then boots only the first.
	fastTrack bool
	// ahead is a fakePower boot made before the next request (BootAhead),
	// which serves that step.
	ahead *qemu.VM

	// bmc holds the power for ipmiPower and redfishPower.
	bmc bmcPower

	// boots are the ramdisk boots so far, the last one last; endBoot
	// ends what options set up for the last one.
	boots   []*qemu.VM
	endBoot func()
	// bootsBefore is the BMC's count of power-ons before the step.
	bootsBefore int
}

// step is what one provision-state change gave.
type step struct {
	// VM is the ramdisk that served the step (fakePower: still running;
	// a BMC's: the first power-on of the step), nil when no ramdisk did.
	VM *qemu.VM
	// Took is the time from the request to the end state.
	Took time.Duration
	// Node is the node in its end state.
	Node *nodes.Node
	// PowerOns is how many times a BMC powered the machine on during the
	// step (a deploy's: the ramdisk, then the deployed OS); 0 with
	// fakePower.
	PowerOns int
}

// Inspect is inspection, ending in manageable.
func (l *lifecycle) Inspect(timeout time.Duration) step {
	l.t.Helper()
	return l.To(nodes.ProvisionStateOpts{Target: nodes.TargetInspect}, timeout)
}

// Provide is provide: automated cleaning, ending in available. With
// automated cleaning off no ramdisk boots: ask with Change instead.
func (l *lifecycle) Provide(timeout time.Duration) step {
	l.t.Helper()
	return l.To(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, timeout)
}

// Clean is a manual cleaning with steps, ending in manageable.
func (l *lifecycle) Clean(timeout time.Duration, steps ...nodes.CleanStep) step {
	l.t.Helper()
	return l.To(nodes.ProvisionStateOpts{Target: nodes.TargetClean, CleanSteps: steps}, timeout)
}

// Deploy is a deploy with deploy steps besides Ironic's own, ending in
// active.
func (l *lifecycle) Deploy(timeout time.Duration, steps ...nodes.DeployStep) step {
	l.t.Helper()
	return l.To(nodes.ProvisionStateOpts{Target: nodes.TargetActive, DeploySteps: steps}, timeout)
}

// Rescue boots the rescue ramdisk with password, ending in rescue.
func (l *lifecycle) Rescue(timeout time.Duration, password string) step {
	l.t.Helper()
	return l.To(nodes.ProvisionStateOpts{Target: nodes.TargetRescue, RescuePassword: password}, timeout)
}

// Undeploy is undeploy with automated cleaning, ending in available
// (with cleaning off: Change).
func (l *lifecycle) Undeploy(timeout time.Duration) step {
	l.t.Helper()
	return l.To(nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}, timeout)
}

// Unrescue leaves rescue, ending in active; no ramdisk boots.
func (l *lifecycle) Unrescue(timeout time.Duration) step {
	l.t.Helper()
	return l.To(nodes.ProvisionStateOpts{Target: nodes.TargetUnrescue}, timeout)
}

// Change asks Ironic for opts and waits up to timeout for the state the
// change ends in, booting nothing: for a change no ramdisk serves (manage;
// provide or undeploy with automated cleaning off).
func (l *lifecycle) Change(opts nodes.ProvisionStateOpts, timeout time.Duration) *nodes.Node {
	l.t.Helper()
	_, done := l.request(opts)
	n, err := l.ironic.WaitState(l.ctx, l.node, done, timeout)
	if err != nil {
		l.t.Fatal(err)
	}
	return n
}

// provisionStates are, for a provision-state change to target, the state
// in which Ironic waits for the ramdisk it boots for it (empty: it boots
// none) and the state the change ends in.
func provisionStates(target nodes.TargetProvisionState) (wait, done string, ok bool) {
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

// To asks Ironic for opts and waits up to timeout for the state the
// change ends in.
func (l *lifecycle) To(opts nodes.ProvisionStateOpts, timeout time.Duration) step {
	t := l.t
	t.Helper()
	start := time.Now()
	vm := l.Start(opts)
	wait, done, _ := provisionStates(opts.Target)
	n, err := l.ironic.WaitState(l.ctx, l.node, done, timeout)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	powerOns := 0
	if l.power != fakePower {
		powerOns = l.bmc.Boots() - l.bootsBefore
		t.Logf("%s: %s, %d power-on(s)", opts.Target, done, powerOns)
		if vm = l.bmc.VMOfBoot(l.bootsBefore + 1); vm == nil && wait != "" {
			t.Fatalf("%s: Ironic never powered the machine on (BMC events: %s)", opts.Target, strings.Join(l.bmc.Events(), "; "))
		}
		if wait != "" {
			l.boots = append(l.boots, vm)
			l.checkBoot(vm)
		}
	}
	return step{VM: vm, Took: took, Node: n, PowerOns: powerOns}
}

// Start asks Ironic for opts and, with fakePower, boots the ramdisk once
// Ironic waits for it (unless fast track has one running), returning its
// VM; it does not wait for the end state, for a scenario that watches the
// step itself (what Ironic shows only while the ramdisk works, a failure
// it expects). A BMC boots the machine by itself: Start returns nil.
func (l *lifecycle) Start(opts nodes.ProvisionStateOpts) *qemu.VM {
	t := l.t
	t.Helper()
	wait, _, _ := provisionStates(opts.Target)
	kernel := l.power == fakePower && wait != ""
	reuse := l.running()
	if !l.fastTrack {
		reuse = nil
	}
	if kernel && l.ahead != nil {
		reuse, l.ahead = l.ahead, nil
	}
	if kernel && reuse == nil {
		// The last boot ends before the request, as Ironic's power-off
		// would end it: its agent could otherwise look the node up
		// again and take the token meant for the next boot.
		l.Stop()
	}
	l.request(opts)
	if !kernel {
		return nil
	}
	if reuse != nil {
		return reuse
	}
	if _, err := l.ironic.WaitState(l.ctx, l.node, wait, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return l.bootRamdisk()
}

// request checks l and asks Ironic for opts; it returns the state in which
// Ironic waits for the ramdisk (empty: none boots) and the one the change
// ends in.
func (l *lifecycle) request(opts nodes.ProvisionStateOpts) (wait, done string) {
	t := l.t
	t.Helper()
	wait, done, ok := provisionStates(opts.Target)
	if !ok {
		t.Fatalf("lifecycle %s: no known end state for target %q", l.node, opts.Target)
	}
	if l.power == fakePower && l.boot != kernelBoot {
		t.Fatalf("lifecycle %s: %s with %s: fake power can only hand QEMU the kernel", l.node, l.power, l.boot)
	}
	if l.power != fakePower && l.bmc == nil {
		t.Fatalf("lifecycle %s: %s without a BMC", l.node, l.power)
	}
	if l.bmc != nil {
		l.bootsBefore = l.bmc.Boots()
	}
	if l.power != fakePower && l.boot == kernelBoot && l.machine.Append != "" {
		k, ok := l.bmc.(kernelArgsBMC)
		if !ok {
			t.Fatalf("lifecycle %s: %s with %s and machine.Append set: the BMC (%T) takes no kernel parameters", l.node, l.power, l.boot, l.bmc)
		}
		k.SetKernelArgs(l.machine.Append)
	}
	if err := l.ironic.Provision(l.ctx, l.node, opts); err != nil {
		t.Fatal(err)
	}
	return wait, done
}

// running is the fakePower ramdisk that still runs, nil if none.
func (l *lifecycle) running() *qemu.VM {
	if len(l.boots) == 0 {
		return nil
	}
	vm := l.boots[len(l.boots)-1]
	select {
	case <-vm.Done():
		return nil
	default:
		return vm
	}
}

// bootRamdisk boots the machine once Ironic waits for the ramdisk, as
// Ironic's power-on would. Not before: a ramdisk that booted before Ironic
// "rebooted" the node could be handed an agent token the reboot then
// wipes.
func (l *lifecycle) bootRamdisk() *qemu.VM {
	l.t.Helper()
	m := l.machine
	var opts qemu.Options
	if l.options != nil {
		opts, l.endBoot = l.options(&m)
	}
	vm := boot(l.t, l.ctx, m, opts)
	l.boots = append(l.boots, vm)
	return vm
}

// BootAhead boots the ramdisk with fakePower now, before the next
// request, and returns its VM: a machine already up when Ironic asks,
// whose agent meets the node's change while it runs (what a scenario does
// to the running machine first, a path pulled, is then under the step).
// That boot serves the next step, which boots nothing else.
func (l *lifecycle) BootAhead() *qemu.VM {
	l.t.Helper()
	if l.power != fakePower {
		l.t.Fatalf("lifecycle %s: BootAhead with %s: a BMC boots the machine on Ironic's power-on", l.node, l.power)
	}
	l.Stop()
	l.ahead = l.bootRamdisk()
	return l.ahead
}

// Stop ends the last fakePower boot, as a power-off would, and what its
// options set up for it.
func (l *lifecycle) Stop() {
	if len(l.boots) > 0 && l.power == fakePower {
		l.boots[len(l.boots)-1].Kill()
	}
	if l.endBoot != nil {
		l.endBoot()
		l.endBoot = nil
	}
}

// WaitOff waits until Ironic reports the node off after what, and checks
// that the BMC's machine is.
func (l *lifecycle) WaitOff(what string) {
	l.t.Helper()
	if _, err := l.ironic.WaitFor(l.ctx, l.node, 2*time.Minute, "power off after "+what, func(n *nodes.Node) bool {
		return n.PowerState == "power off" && n.TargetPowerState == ""
	}); err != nil {
		l.t.Fatal(err)
	}
	if l.bmc != nil && l.bmc.On() {
		l.t.Errorf("%s: Ironic reports power off, the machine runs", what)
	}
}

// Boots are the ramdisk boots so far, the last one last.
func (l *lifecycle) Boots() []*qemu.VM { return l.boots }

// checkBoot checks that a BMC's ramdisk boot came the way l.boot says.
func (l *lifecycle) checkBoot(vm *qemu.VM) {
	t := l.t
	t.Helper()
	kernel := slices.Contains(vm.Cmdline, "-kernel")
	switch {
	case l.boot == kernelBoot && !kernel:
		t.Errorf("%s: the ramdisk boot was not handed the kernel: %s", l.boot, qemu.ShellQuote(vm.Cmdline))
	case l.boot == netBoot && (!vm.Machine.NetBoot || kernel):
		t.Errorf("%s: the ramdisk boot was not a network boot: %s", l.boot, qemu.ShellQuote(vm.Cmdline))
	case l.boot == virtualMedia && (vm.Machine.ISO == "" || kernel):
		t.Errorf("%s: the ramdisk boot was not from the virtual CD: %s", l.boot, qemu.ShellQuote(vm.Cmdline))
	}
}

// report reports, as the BMC scenarios do for each step named what, its
// time, the guest uptime at which the agent started and the console time
// of its first heartbeat; it returns the step's VM.
func (s step) report(t *testing.T, what string) *qemu.VM {
	t.Helper()
	reportSeconds(t, s.Took, what+"_s")
	if s.VM == nil {
		return nil
	}
	hb := "?"
	if l, ok := s.VM.Find(logtext.Msg(agent.EventHeartbeatSuccessful)); ok {
		hb = fmt.Sprintf("%.1fs", l.At.Seconds())
	}
	reportSecondsText(t, uptimeAt(s.VM, logtext.Msg(rdinit.EventAgentStarted)), what, "agent_started_uptime_s")
	reportSecondsText(t, hb, what, "first_heartbeat_s")
	return s.VM
}

// kernelLifecycle is a lifecycle for node with fake power and a kernel
// boot of m.
func kernelLifecycle(t *testing.T, ctx context.Context, c *ironic.Client, node string, m qemu.Machine) *lifecycle {
	return &lifecycle{t: t, ctx: ctx, ironic: c, node: node, power: fakePower, boot: kernelBoot, machine: m}
}

// bmcLifecycle is a lifecycle for node whose machine bmc powers (p is
// ipmiPower or redfishPower), booting the ramdisk by b.
func bmcLifecycle(t *testing.T, ctx context.Context, c *ironic.Client, node string, p power, b bootMethod, bmc bmcPower) *lifecycle {
	return &lifecycle{t: t, ctx: ctx, ironic: c, node: node, power: p, boot: b, bmc: bmc}
}
