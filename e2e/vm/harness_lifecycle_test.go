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
	tblifecycle "github.com/ironic-go/ironic-agent/internal/testbed/lifecycle"
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
	WaitBoot(ctx context.Context, after int) (*qemu.VM, error)
	Events() []string
}

// kernelArgsBMC is a BMC whose network boot hands QEMU the ramdisk's
// kernel (bmcsim.IPMISim on a machine without PXE NICs), with the kernel
// parameters it is given.
type kernelArgsBMC interface {
	SetKernelArgs(append string)
}

// lifecycle takes one enrolled node through Ironic's provision states
// with the test bed's lifecycle driver (internal/testbed/lifecycle), its
// ramdisk a QEMU machine that fake power boots or a BMC powers on. Each
// step asks Ironic for a target, has the ramdisk boot the way power and
// boot say, and waits for the state the step ends in.
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

	// bmc holds the power for ipmiPower and redfishPower.
	bmc bmcPower

	// core is the driver, made at the first step.
	core *tblifecycle.Driver[*qemu.VM]
	// endBoot ends what options set up for the last boot.
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

// driver is l's lifecycle driver: fakePower boots the ramdisk itself, a
// BMC on Ironic's power-on.
func (l *lifecycle) driver() *tblifecycle.Driver[*qemu.VM] {
	if l.core == nil {
		l.core = &tblifecycle.Driver[*qemu.VM]{T: l.t, Ctx: l.ctx, Ironic: l.ironic, Node: l.node,
			Before: l.beforeRequest, Stopped: l.endOptions}
		if l.power == fakePower {
			l.core.Boot = l.bootRamdisk
		}
	}
	// A scenario may switch these between steps (another API endpoint,
	// fast track from here on).
	l.core.Ironic, l.core.FastTrack = l.ironic, l.fastTrack
	return l.core
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
	return l.driver().Change(opts, timeout)
}

// To asks Ironic for opts and waits up to timeout for the state the
// change ends in.
func (l *lifecycle) To(opts nodes.ProvisionStateOpts, timeout time.Duration) step {
	t := l.t
	t.Helper()
	s := l.driver().To(opts, timeout)
	vm := s.Ramdisk
	powerOns := 0
	if l.power != fakePower {
		wait, done, _ := tblifecycle.States(opts.Target)
		powerOns = l.bmc.Boots() - l.bootsBefore
		t.Logf("%s: %s, %d power-on(s)", opts.Target, done, powerOns)
		if vm = l.bmc.VMOfBoot(l.bootsBefore + 1); vm == nil && wait != "" {
			t.Fatalf("%s: Ironic never powered the machine on (BMC events: %s)", opts.Target, strings.Join(l.bmc.Events(), "; "))
		}
		if wait != "" {
			l.core.Record(vm)
			l.checkBoot(vm)
		}
	}
	return step{VM: vm, Took: s.Took, Node: s.Node, PowerOns: powerOns}
}

// Start asks Ironic for opts and, with fakePower, boots the ramdisk once
// Ironic waits for it (unless fast track has one running), returning its
// VM; it does not wait for the end state, for a scenario that watches the
// step itself (what Ironic shows only while the ramdisk works, a failure
// it expects). A BMC boots the machine by itself: Start returns nil.
func (l *lifecycle) Start(opts nodes.ProvisionStateOpts) *qemu.VM {
	l.t.Helper()
	vm, _ := l.driver().Start(opts)
	return vm
}

// Wait waits up to timeout for the node to reach state, for a scenario
// that began its step with Start.
func (l *lifecycle) Wait(state string, timeout time.Duration) *nodes.Node {
	l.t.Helper()
	return l.driver().Wait(state, timeout)
}

// PowerOn waits up to 3 minutes for the k-th power-on by the BMC in the
// step under way (1: the ramdisk's; 2 in a deploy: the deployed OS's),
// for a scenario that began the step with Start.
func (l *lifecycle) PowerOn(k int) *qemu.VM {
	l.t.Helper()
	if l.bmc == nil {
		l.t.Fatalf("lifecycle %s: PowerOn with %s: no BMC powers the machine on", l.node, l.power)
	}
	ctx, cancel := context.WithTimeout(l.ctx, 3*time.Minute)
	defer cancel()
	vm, err := l.bmc.WaitBoot(ctx, l.bootsBefore+k-1)
	if err != nil {
		l.t.Fatal(err)
	}
	return vm
}

// beforeRequest checks l before a request and readies the BMC: its count
// of power-ons, and the kernel parameters of its next boot.
func (l *lifecycle) beforeRequest(nodes.ProvisionStateOpts) {
	t := l.t
	t.Helper()
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
}

// bootRamdisk boots l.machine with its options, as Ironic's power-on
// would; the driver calls it once Ironic waits for the ramdisk.
func (l *lifecycle) bootRamdisk() (*qemu.VM, error) {
	l.t.Helper()
	m := l.machine
	var opts qemu.Options
	if l.options != nil {
		opts, l.endBoot = l.options(&m)
	}
	return boot(l.t, l.ctx, m, opts), nil
}

// endOptions ends what options set up for the last boot.
func (l *lifecycle) endOptions() {
	if l.endBoot != nil {
		l.endBoot()
		l.endBoot = nil
	}
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
	return l.driver().BootAhead()
}

// Stop ends the last fakePower boot, as a power-off would, and what its
// options set up for it.
func (l *lifecycle) Stop() { l.driver().Stop() }

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
func (l *lifecycle) Boots() []*qemu.VM { return l.driver().Boots() }

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
	bootFloor, uptimeFloor := floorsOf(s.VM.Machine)
	if uptimeFloor != "" {
		reportSecondsTextLimit(t, uptimeAt(s.VM, logtext.Msg(rdinit.EventAgentStarted)), uptimeFloor, what, "agent_started_uptime_s")
	} else {
		reportSecondsText(t, uptimeAt(s.VM, logtext.Msg(rdinit.EventAgentStarted)), what, "agent_started_uptime_s")
	}
	reportSecondsTextLimit(t, hb, bootFloor, what, "first_heartbeat_s")
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
