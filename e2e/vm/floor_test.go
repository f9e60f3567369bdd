package vm

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/deploy/image"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/initramfs"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	tblifecycle "github.com/ironic-go/ironic-agent/internal/testbed/lifecycle"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/metric"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
	"github.com/ironic-go/ironic-agent/internal/testbed/standin"
)

// The floors: the limits the scenarios' figures stand beside on
// docs/performance.md, measured in the same run by tests of their own and
// named vm.floor.<what>_<firmware>_s; a figure's line names its floor
// (metric.LimitFrom) and tools/perfpage takes the floor's value from the
// same metrics file.

// kernelBootFloor names the time from QEMU's start to the first line of a
// do-nothing init (TestVMKernelBootFloor), the floor under the agent's
// first heartbeat on the same firmware.
func kernelBootFloor(fw qemu.Firmware) string {
	return metric.Name("vm", "floor", "kernel_boot_"+string(fw)+"_s")
}

// initUptimeFloor names the guest's uptime when that init ran, the floor
// under the uptime at which the agent started.
func initUptimeFloor(fw qemu.Firmware) string {
	return metric.Name("vm", "floor", "init_uptime_"+string(fw)+"_s")
}

// cleaningFloor names the time automated cleaning takes in the suite's
// Ironic with a stand-in agent that answers at once (TestVMCleaningFloor):
// the floor Ironic's own polling sets under cleaning with the agent.
func cleaningFloor() string { return metric.Name("vm", "floor", "cleaning_standin_s") }

// deployFloor names the time a deploy takes in the suite's Ironic with
// the stand-in agent (TestVMDeployFloor): the floor under
// TestVMDeployBIOS's deploy.
func deployFloor() string { return metric.Name("vm", "floor", "deploy_standin_s") }

// bootFloorReady is the line internal/testbed/guest/bootfloor prints.
const bootFloorReady = "bootfloor: ready"

// reportFirstHeartbeat reports the first heartbeat of a ramdisk booted
// directly (QEMU's -kernel, as serviceMachine boots it) on fw, as found on
// the console ("12.3s", or "?": nothing), beside the kernel-boot floor.
func reportFirstHeartbeat(t *testing.T, fw string, heartbeat string, figure ...string) {
	t.Helper()
	reportSecondsTextLimit(t, heartbeat, kernelBootFloor(qemu.Firmware(fw)), figure...)
}

// floorsOf names the floors under a ramdisk boot of m: under its first
// heartbeat, and under the uptime at which its agent started ("" where no
// such floor is measured: arm64). A floor boots the kernel directly; a
// network or virtual-media boot adds the firmware's loading on top.
func floorsOf(m qemu.Machine) (boot, uptime string) {
	if m.Arch == qemu.Arm64 {
		return arm64KernelBootFloor, ""
	}
	return kernelBootFloor(m.Firmware), initUptimeFloor(m.Firmware)
}

// reportAgentStarted reports the guest's uptime at which the agent
// started in vm, a ramdisk booted directly on fw, beside the floor of a
// do-nothing init's.
func reportAgentStarted(t *testing.T, vm *qemu.VM, fw string, figure ...string) {
	t.Helper()
	reportSecondsTextLimit(t, uptimeAt(vm, logtext.Msg(rdinit.EventAgentStarted)), initUptimeFloor(qemu.Firmware(fw)), figure...)
}

// TestVMKernelBootFloor boots, on each firmware, the agent's VM shape
// (serviceMachine: the same disks, NICs, memory and kernel) with the
// agent's initramfs and, laid over its /init, internal/testbed/guest/bootfloor,
// which prints one line and powers off. The time from QEMU's start to that
// line, measured as the scenarios measure the first heartbeat, is what
// the firmware, the kernel and the unpacking of the same initramfs take:
// the floor (vm.floor.kernel_boot_<firmware>_s) the agent's boot to its
// first heartbeat cannot beat; the guest's uptime then is the floor under
// the uptime the agent starts at. It runs in every round: a figure's
// floor comes from its own round's metrics file.
func TestVMKernelBootFloor(t *testing.T) {
	seriesIndependent(t) // no Ironic: the kernel's own boot
	rd := ramdisk(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	init := filepath.Join(t.TempDir(), "bootfloor")
	if err := qemu.BuildStatic(ctx, "./internal/testbed/guest/bootfloor", init); err != nil {
		t.Fatal(err)
	}
	for _, fw := range []qemu.Firmware{qemu.BIOS, qemu.UEFI} {
		t.Run(string(fw), func(t *testing.T) {
			m := serviceMachine(t, rd, string(fw), newAgentPort(t), newMACs(t))
			vm, l := bootFloor(t, ctx, m, rd.InitrdFor(m.Firmware), init)
			metric.Seconds(t, kernelBootFloor(fw), l.At)
			up := uptimeAt(vm, bootFloorReady)
			if up == "?" {
				t.Fatalf("the ready line %q has no uptime", l.Text)
			}
			reportSecondsTextAs(t, up, initUptimeFloor(fw))
		})
	}
}

// bootFloor boots m (its kernel, its disks made) with the initramfs base
// and init, a do-nothing init such as internal/testbed/guest/bootfloor,
// laid over its /init, and returns the VM and init's ready line once the
// machine has powered off.
func bootFloor(t *testing.T, ctx context.Context, m qemu.Machine, base, init string) (*qemu.VM, qemu.Line) {
	t.Helper()
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	m.Initrd = filepath.Join(m.Dir, "bootfloor.initramfs")
	if err := overlayInit(base, init, m.Initrd); err != nil {
		t.Fatal(err)
	}
	vm := boot(t, ctx, m, qemu.Options{})
	l, err := vm.WaitFor(ctx, bootFloorReady)
	if err != nil {
		t.Fatalf("the do-nothing init never reported: %v", err)
	}
	if err := vm.Wait(ctx); err != nil {
		t.Fatalf("the do-nothing init did not power off: %v", err)
	}
	return vm, l
}

// runStandIn starts internal/testbed/standin for the node of macs on a
// port of the test's, where the lifecycle driver would boot the VM, and stops
// it when the test ends.
func runStandIn(t *testing.T, ctx context.Context, s *suite, macs [2]string) *standin.Running {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(newAgentPort(t)))
	if err != nil {
		t.Fatal(err)
	}
	agent := standin.New(standin.Config{IronicURL: s.services.IronicURL, MACs: macs[:], Listener: ln, TLS: s.series.RequiresTLS()}).Start(ctx)
	t.Cleanup(func() {
		agent.Kill()
		if err := agent.Err(); err != nil {
			t.Errorf("stand-in: %v", err)
		}
	})
	return agent
}

// standInFlow takes the node through the provision-state change opts with
// the lifecycle driver, the stand-in the ramdisk it boots once Ironic
// waits for one, and waits for the state the change ends in: the time from
// the request to that state, as the driver times a step.
func standInFlow(t *testing.T, ctx context.Context, s *suite, uuid string, opts nodes.ProvisionStateOpts, macs [2]string) time.Duration {
	t.Helper()
	d := &tblifecycle.Driver[*standin.Running]{T: t, Ctx: ctx, Ironic: s.ironic, Node: uuid,
		Boot: func() (*standin.Running, error) { return runStandIn(t, ctx, s, macs), nil }}
	start := time.Now()
	agent, _ := d.Start(opts)
	_, done, _ := tblifecycle.States(opts.Target)
	if _, err := s.ironic.WaitState(ctx, uuid, done, 6*time.Minute); err != nil {
		t.Fatalf("%v; the stand-in got %v", err, agent.Received())
	}
	took := time.Since(start)
	var names []string
	for _, c := range agent.Received() {
		names = append(names, fmt.Sprintf("%s at %.1fs", c.Name, c.At.Sub(start).Seconds()))
	}
	t.Logf("commands: %s", strings.Join(names, ", "))
	return took
}

// TestVMDeployFloor deploys TestVMDeployBIOS's node (the same properties,
// interfaces, image server and root-device hint) through the suite's
// Ironic with internal/testbed/standin in place of the VM, timed from the
// request to active as TestVMDeployBIOS times its deploy: Ironic's own
// pace, the floor (vm.floor.deploy_standin_s) under that deploy. It runs
// in every round.
func TestVMDeployFloor(t *testing.T) {
	s := services(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	c := deployCase{firmware: "bios", macs: newMACs(t), props: map[string]any{"capabilities": "boot_mode:bios"},
		management: "noop", image: mbrImage()}
	m := qemu.Machine{GuestFwd: map[string]string{}}
	node, _ := availableForDeploy(t, ctx, s, c, &m)
	metric.Seconds(t, deployFloor(), standInFlow(t, ctx, s, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetActive}, c.macs))
}

// TestVMCleaningFloor takes a node of the suite's Ironic through automated
// cleaning, as TestVMInspectCleanBIOS does (the same node shape, the same
// request, timed from it to available), with internal/testbed/standin on
// the host in place of the VM: it looks the node up and heartbeats as the
// agent does, on its schedule, and reports the generic manager's clean
// steps, each of which it answers at once. What remains is Ironic's own
// pace, the floor (vm.floor.cleaning_standin_s) under cleaning with the
// agent. It runs in every round: each series paces cleaning its own way.
func TestVMCleaningFloor(t *testing.T) {
	s := services(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	macs := newMACs(t)
	node := ironic.Enroll(t, ctx, s.ironic, ironic.NodeSpec{Name: "vm-floor-clean", InspectInterface: s.inspectInterface(),
		Properties: map[string]any{"capabilities": "boot_mode:bios"}}, macs[:]...)
	took := standInFlow(t, ctx, s, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, macs)
	metric.Seconds(t, cleaningFloor(), took)
}

// fetchDirectManifest is the steps-directory manifest of
// internal/testbed/guest/fetchdirect: a deploy step run only when the
// deploy request asks for it.
const fetchDirectManifest = `{"step": "fetch_direct", "interface": "deploy", "priority": 0,
 "clean": false, "deploy": true, "timeout": 600,
 "argsinfo": {"url": {"description": "the image to fetch", "required": true},
  "proxy": {"description": "the HTTP proxy to fetch it through", "required": false}}}
`

// fetchDirectRamdisk is the agent ramdisk with the fetch_direct step.
func fetchDirectRamdisk(t *testing.T, ctx context.Context) *qemu.Ramdisk {
	t.Helper()
	return stepRamdisk(t, ctx, "./internal/testbed/guest/fetchdirect", "fetch_direct", fetchDirectManifest)
}

// fetchDirectStep is the deploy step that fetches the image the node
// updates ops deploy (its image_source, through its image_http_proxy) the
// `curl | dd` way, after the ramdisk is up (deploy.deploy, 100) and before
// write_image (80).
func fetchDirectStep(t *testing.T, ops nodes.UpdateOpts) nodes.DeployStep {
	t.Helper()
	args := map[string]any{}
	for _, op := range ops {
		o, ok := op.(nodes.UpdateOperation)
		if !ok {
			continue
		}
		switch o.Path {
		case "/instance_info/image_source":
			args["url"] = o.Value
		case "/driver_info/image_http_proxy":
			args["proxy"] = o.Value
		}
	}
	if args["url"] == nil {
		t.Fatal("the deploy's node updates name no image_source")
	}
	return nodes.DeployStep{Interface: nodes.InterfaceDeploy, Step: "fetch_direct", Priority: 85, Args: args}
}

var (
	// fetchDirectLine is fetchdirect's console line.
	fetchDirectLine = regexp.MustCompile(`fetchdirect: wrote ([0-9]+) bytes to \S+ in ([0-9.]+) s`)
	// imageWrittenLine is the agent's summary of a write (deploy/image's
	// WriteResult.Summary).
	imageWrittenLine = regexp.MustCompile(`image, ([0-9]+) bytes on disk\) written to \S+ in ([0-9.]+)s`)
)

// reportThroughput reports the agent's write of the image in vm as MB/s,
// beside fetch_direct's of the same image in the same VM.
func reportThroughput(t *testing.T, vm *qemu.VM) {
	t.Helper()
	dd, okDD := consoleRate(vm, fetchDirectLine)
	agent, okAgent := writeRate(vm)
	if !okDD {
		t.Errorf("the console has no fetch_direct line (%s)", fetchDirectLine)
	}
	if !okAgent {
		t.Errorf("the console has no image written line (%s)", imageWrittenLine)
	}
	if okDD {
		reportValue(t, dd, "MB/s", "fetch_direct_mb_s")
	}
	if okAgent && okDD {
		metric.Report(t, metricName(t, "write_image_mb_s"), agent, "MB/s", metric.Limit(dd))
	}
	// Where the write's time and the agent's CPU went, for a slow run.
	if l, ok := vm.Find(logtext.Msg(image.EventImageWritten)); ok {
		if i := strings.Index(l.Text, "stages="); i >= 0 {
			t.Logf("the agent's write: %s", l.Text[i:])
		}
	}
}

// writeRate is the agent's write of the image in vm, in MB/s, from its
// summary line.
func writeRate(vm *qemu.VM) (float64, bool) { return consoleRate(vm, imageWrittenLine) }

// consoleRate is bytes over seconds, in MB/s, of the first console line
// of vm matching re (its two groups).
func consoleRate(vm *qemu.VM, re *regexp.Regexp) (float64, bool) {
	for _, l := range vm.Lines() {
		if m := re.FindStringSubmatch(l.Text); m != nil {
			n, _ := strconv.ParseFloat(m[1], 64)
			s, _ := strconv.ParseFloat(m[2], 64)
			if s > 0 {
				return n / s / 1e6, true
			}
		}
	}
	return 0, false
}

// overlayInit writes to out the initramfs base followed by a second
// archive holding init as /init: the kernel unpacks both, the second
// over the first, so the machine unpacks the same initramfs and runs
// init instead of the agent's.
func overlayInit(base, init, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := os.Open(base)
	if err != nil {
		return err
	}
	defer b.Close()
	n, err := io.Copy(f, b)
	if err != nil {
		return fmt.Errorf("copy %s: %w", base, err)
	}
	// The kernel reads the next archive's header at a 4-byte boundary and
	// skips the zeros before it.
	if _, err := f.Write(make([]byte, (512-n%512)%512)); err != nil {
		return err
	}
	bin, err := os.Open(init)
	if err != nil {
		return err
	}
	defer bin.Close()
	st, err := bin.Stat()
	if err != nil {
		return err
	}
	w := initramfs.NewWriter(f)
	if err := w.CharDev("dev/console", 0o600, 5, 1); err != nil {
		return err
	}
	if err := w.File("init", 0o755, st.Size(), bin); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}
