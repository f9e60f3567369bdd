// Command bootbench measures where the agent ramdisk's boot time goes, from
// QEMU's start to the agent's first accepted heartbeat, against Debian's
// Ironic on the host (root: it starts Ironic like the e2e tests do). Each run
// takes an enrolled node from manageable to cleaning through the test bed's
// lifecycle driver (internal/testbed/lifecycle), which boots
// qemu.DefaultMachine under SeaBIOS with the kernel parameters Ironic's
// boot would give once Ironic waits for it, and splits the serial
// console's timestamps into phases:
//
//	firmware+load  QEMU start to the kernel's start (host time of the init's
//	               first line minus the guest uptime it logged)
//	kernel         kernel start to /init (the init's first uptime)
//	modules        /init to "modules loaded" (mounts, coldplug)
//	network        "modules loaded" to "network ready" (link up, DHCP)
//	settle         "network ready" to "agent started" (block device wait)
//	agent          agent start to "lookup succeeded"
//	heartbeat      "lookup succeeded" to "heartbeat successful"
//
// go run ./tools/bootbench -ramdisk DIR -n 3 [-kernel pvh|bzimage]
// go run ./tools/bootbench -compare OLD:bzimage,NEW:pvh -n 5
package main

import (
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/lifecycle"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// Ports of the platform range (9600-9699), so the bench can run beside
// the e2e suites.
const (
	ironicPort    = 9610
	inspectorPort = 9611
	agentPort     = 9620
	guestHost     = "10.0.2.100"
)

func main() {
	qemu.MaybeRelay()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bootbench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	rdDir := flag.String("ramdisk", "", "directory with "+ramdisk.KernelName+" and "+ramdisk.InitramfsName+" (mkramdisk -out); default: build one")
	n := flag.Int("n", 3, "boots")
	work := flag.String("work", "", "work directory (default: a temporary one)")
	extra := flag.String("append", "", "more kernel parameters")
	kind := flag.String("kernel", "pvh", "pvh: boot the uncompressed kernel through its PVH entry, as the VM tests do; bzimage: the bzImage, as a server boots it")
	compare := flag.String("compare", "", "`DIR:KIND,...`: boot these ramdisk directories in turn, n rounds (instead of -ramdisk and -kernel), so a changing machine load hits all alike; KIND is bzimage, pvh or pvh+raw (also the initramfs uncompressed, as the VM tests boot)")
	flag.Parse()
	if *kind != "pvh" && *kind != "bzimage" {
		return fmt.Errorf("-kernel %q: want pvh or bzimage", *kind)
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root (runs Debian's Ironic)")
	}
	if *work == "" {
		d, err := os.MkdirTemp("", "bootbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*work = d
	}
	var configs []config
	if *compare != "" {
		for f := range strings.SplitSeq(*compare, ",") {
			dir, k, ok := strings.Cut(f, ":")
			if !ok || (k != "pvh" && k != "bzimage" && k != "pvh+raw") {
				return fmt.Errorf("-compare %q: want DIR:pvh, DIR:pvh+raw or DIR:bzimage items", f)
			}
			c, err := dirConfig(ctx, dir, k)
			if err != nil {
				return err
			}
			configs = append(configs, c)
		}
	} else if *rdDir != "" {
		c, err := dirConfig(ctx, *rdDir, *kind)
		if err != nil {
			return err
		}
		configs = append(configs, c)
	} else {
		rd, err := qemu.BuildRamdisk(ctx)
		if err != nil {
			return err
		}
		c := config{name: "built:" + *kind, kernel: rd.Kernel, initrd: rd.Initrd}
		if *kind == "pvh" {
			if rd.PVH == "" {
				return rd.PVHErr
			}
			c.kernel = rd.PVH
		}
		configs = append(configs, c)
	}
	if _, err := ironic.EnsurePackages(ctx); err != nil {
		return err
	}
	svcDir := filepath.Join(*work, "services")
	if err := os.MkdirAll(svcDir, 0o755); err != nil {
		return err
	}
	svc, err := ironic.Start(ctx, ironic.Config{Dir: svcDir, IronicPort: ironicPort, InspectorPort: inspectorPort, NoInspector: true})
	if err != nil {
		return err
	}
	defer svc.Close()
	ic, err := ironic.NewClient(svc.IronicURL)
	if err != nil {
		return err
	}
	macs := [2]string{"52:54:00:6d:0b:01", "52:54:00:6d:0b:02"}
	node, err := ic.CreateNode(ctx, ironic.NodeSpec{Name: "bootbench", Properties: map[string]any{"capabilities": "boot_mode:bios"}})
	if err != nil {
		return err
	}
	defer func() { _ = ic.DeleteNode(context.Background(), node.UUID) }()
	for i, mac := range macs {
		if _, err := ic.CreatePort(ctx, node.UUID, mac, i == 0); err != nil {
			return err
		}
	}
	// The test bed's lifecycle driver, its ramdisk each round's QEMU
	// machine: it boots the machine once Ironic waits for the ramdisk, as
	// the VM tests do.
	d := &lifecycle.Driver[*qemu.VM]{Ctx: ctx, Ironic: ic, Node: node.UUID}
	manage := nodes.ProvisionStateOpts{Target: nodes.TargetManage}
	if _, err := d.TryChange(manage, time.Minute); err != nil {
		return err
	}
	all := make([][]phases, len(configs))
	for i := range *n * len(configs) {
		c := configs[i%len(configs)]
		m := qemu.DefaultMachine(qemu.BIOS)
		m.Dir = filepath.Join(*work, fmt.Sprintf("vm%d", i))
		m.Kernel, m.Initrd = c.kernel, c.initrd
		m.NICs[0].MAC, m.NICs[1].MAC = macs[0], macs[1]
		m.GuestFwd = map[string]string{guestHost + ":" + strconv.Itoa(ironicPort): "127.0.0.1:" + strconv.Itoa(ironicPort)}
		m.HostFwd = map[int]int{agentPort: 9999}
		for j := range m.Disks {
			if m.Disks[j].ID == "scsi1" {
				m.Disks[j].SizeMB = 5 << 10 // the agent waits for a disk of 4 GiB or more
			}
		}
		m.Append = strings.Join([]string{"ipa-api-url=http://" + guestHost + ":" + strconv.Itoa(ironicPort),
			"ipa-advertise-host=127.0.0.1", "ipa-advertise-port=" + strconv.Itoa(agentPort),
			"ironic_agent.dhcp=" + macs[0], *extra}, " ")
		var load string
		d.Boot = func() (*qemu.VM, error) {
			load = loadavg()
			return qemu.Start(ctx, m, qemu.Options{})
		}
		vm, _, err := d.TryStart(nodes.ProvisionStateOpts{Target: nodes.TargetProvide})
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		_, err = vm.WaitFor(wctx, logtext.Msg(agent.EventHeartbeatSuccessful))
		cancel()
		if err == nil {
			_, err = d.TryWait("available", 3*time.Minute)
		}
		d.Stop()
		if err != nil {
			return fmt.Errorf("boot %d: %w (serial console in %s)", i, err, vm.LogPath)
		}
		p, err := split(vm.Lines())
		if err != nil {
			return fmt.Errorf("boot %d: %w (serial console in %s)", i, err, vm.LogPath)
		}
		p.load = load
		all[i%len(configs)] = append(all[i%len(configs)], p)
		fmt.Println(c.name, p.row(i/len(configs)))
		if _, err := d.TryChange(manage, time.Minute); err != nil {
			return err
		}
	}
	for k, c := range configs {
		if len(all[k]) > 1 {
			fmt.Println(c.name, median(all[k]).row(-1))
		}
	}
	return nil
}

// config is one ramdisk and kernel kind to boot.
type config struct{ name, kernel, initrd string }

// dirConfig boots a mkramdisk -out directory: the bzImage, or (pvh) the
// kernel through its PVH entry, and (pvh+raw) the initramfs uncompressed
// as well, as the VM tests do.
func dirConfig(ctx context.Context, dir, kind string) (config, error) {
	c := config{name: dir + ":" + kind, kernel: filepath.Join(dir, ramdisk.KernelName), initrd: filepath.Join(dir, ramdisk.InitramfsName)}
	if kind == "pvh+raw" {
		raw := filepath.Join(dir, ramdisk.InitramfsRawName)
		if err := gunzip(c.initrd, raw); err != nil {
			return c, err
		}
		c.initrd = raw
	}
	if strings.HasPrefix(kind, "pvh") {
		pvh, err := ramdisk.PVH(ctx, c.kernel)
		if err != nil {
			return c, err
		}
		c.kernel = pvh
	}
	return c, nil
}

// phaseNames are the columns, in boot order.
var phaseNames = []string{"firmware+load", "kernel", "modules", "network", "settle", "agent", "heartbeat", "total"}

type phases struct {
	d    []float64 // seconds, one per phaseNames
	load string
}

func (p phases) row(i int) string {
	var b strings.Builder
	if i < 0 {
		b.WriteString("median ")
	} else {
		fmt.Fprintf(&b, "boot %d ", i)
	}
	for k, name := range phaseNames {
		fmt.Fprintf(&b, " %s=%.2f", name, p.d[k])
	}
	if p.load != "" {
		fmt.Fprintf(&b, "  (load %s)", p.load)
	}
	return b.String()
}

func median(all []phases) phases {
	out := phases{d: make([]float64, len(phaseNames))}
	for k := range phaseNames {
		var v []float64
		for _, p := range all {
			v = append(v, p.d[k])
		}
		slices.Sort(v)
		out.d[k] = v[len(v)/2]
	}
	return out
}

// split reads the phases off the console: host timestamps for the agent's
// lines, the init's logged guest uptimes for its own.
func split(lines []qemu.Line) (phases, error) {
	find := func(what string) (qemu.Line, bool) {
		for _, l := range lines {
			if strings.Contains(l.Text, what) {
				return l, true
			}
		}
		return qemu.Line{}, false
	}
	uptimeOf := func(what string) (float64, qemu.Line, error) {
		l, ok := find(what)
		if !ok {
			return 0, l, fmt.Errorf("the console never showed %q", what)
		}
		for f := range strings.FieldsSeq(l.Text) {
			if v, ok := strings.CutPrefix(f, "uptime="); ok {
				u, err := strconv.ParseFloat(strings.Trim(v, `"`), 64)
				return u, l, err
			}
		}
		return 0, l, fmt.Errorf("%q has no uptime: %s", what, l.Text)
	}
	u0, l0, err := uptimeOf(logtext.Msg(rdinit.EventInit))
	if err != nil {
		return phases{}, err
	}
	u1, _, err := uptimeOf(logtext.Msg(rdinit.EventModulesLoaded))
	if err != nil {
		return phases{}, err
	}
	u2, _, err := uptimeOf(logtext.Msg(rdinit.EventNetworkReady))
	if err != nil {
		return phases{}, err
	}
	u3, _, err := uptimeOf(logtext.Msg(rdinit.EventAgentStarted))
	if err != nil {
		return phases{}, err
	}
	lk, ok := find(logtext.Msg(agent.EventLookupSucceeded))
	if !ok {
		return phases{}, errors.New("the console never showed the lookup")
	}
	hb, ok := find(logtext.Msg(agent.EventHeartbeatSuccessful))
	if !ok {
		return phases{}, errors.New("the console never showed a heartbeat")
	}
	kernelStart := l0.At.Seconds() - u0
	agentStart := kernelStart + u3
	return phases{d: []float64{
		kernelStart, u0, u1 - u0, u2 - u1, u3 - u2,
		lk.At.Seconds() - agentStart, hb.At.Seconds() - lk.At.Seconds(), hb.At.Seconds(),
	}}, nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func gunzip(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, zr); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", src, err)
	}
	return out.Close()
}
