package vm

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	tblifecycle "github.com/ironic-go/ironic-agent/internal/testbed/lifecycle"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// sideDeployIronicPort is the API port of the fast-track Ironic of
// TestVMIPADeploy and TestVMIPAMemory, moved by $E2E_PORT_OFFSET.
var sideDeployIronicPort = portOffset() + 9596

// sideDeployMemoryMB is the memory of both machines in TestVMIPADeploy:
// IPA stages a qcow2 image in its RAM-backed root before converting it, so
// the 1 GiB image needs more than the inspection's 2 GiB.
const sideDeployMemoryMB = 3072

// sideImageSize is the size of the deployed image: 1 GiB of
// incompressible data behind an MBR, so the qcow2 file is as large as the
// raw one and both agents move every byte.
const sideImageSize = 1 << 30

// sideImage is one image file served to the guests, with its digests.
type sideImage struct {
	format, path   string
	md5, sha256    []byte
	rawSHA256      []byte // of the raw image: what the disk holds after the deploy
	size, rawBytes int64
}

// sideImages writes the 1 GiB raw image and its qcow2 conversion once per
// test binary, into the suite's directory.
var sideImages = sync.OnceValues(func() (map[string]sideImage, error) {
	dir := filepath.Join(theSuite.dir, "side-images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	raw := filepath.Join(dir, "image.raw")
	if err := writeSideImage(raw); err != nil {
		return nil, err
	}
	qcow := filepath.Join(dir, "image.qcow2")
	if out, err := exec.Command("qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw, qcow).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("qemu-img convert %s: %v: %s", raw, err, out)
	}
	imgs := map[string]sideImage{}
	for format, p := range map[string]string{"raw": raw, "qcow2": qcow} {
		img := sideImage{format: format, path: p, rawBytes: sideImageSize}
		var err error
		if img.md5, img.sha256, img.size, err = digests(p); err != nil {
			return nil, err
		}
		imgs[format] = img
	}
	for f, img := range imgs {
		img.rawSHA256 = imgs["raw"].sha256
		imgs[f] = img
	}
	return imgs, nil
})

// writeSideImage writes sideImageSize pseudo-random bytes behind an MBR
// with one Linux partition over the rest (IPA checks for a partition table
// after a whole-disk write).
func writeSideImage(p string) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	defer f.Close()
	r := rand.NewChaCha8([32]byte{'i', 'p', 'a', '1', '3'})
	buf := make([]byte, 4<<20)
	for off := int64(0); off < sideImageSize; off += int64(len(buf)) {
		_, _ = r.Read(buf)
		if off == 0 {
			clear(buf[440:512])
			buf[446+4] = 0x83
			binary.LittleEndian.PutUint32(buf[446+8:], 2048)
			binary.LittleEndian.PutUint32(buf[446+12:], sideImageSize/512-2048)
			buf[510], buf[511] = 0x55, 0xaa
		}
		if _, err := f.Write(buf); err != nil {
			return err
		}
	}
	return f.Close()
}

// digests are the MD5 and SHA-256 of the file p and its size.
func digests(p string) (md5Sum, sha256Sum []byte, size int64, err error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, 0, err
	}
	defer f.Close()
	m, s := md5.New(), sha256.New()
	size, err = io.Copy(io.MultiWriter(m, s), f)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("reading %s: %w", p, err)
	}
	return m.Sum(nil), s.Sum(nil), size, nil
}

// prefixSHA256 is the SHA-256 of the first n bytes of the file p.
func prefixSHA256(p string, n int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var h hash.Hash = sha256.New()
	if _, err := io.CopyN(h, f, n); err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	return h.Sum(nil), nil
}

// sideDeployBed is a fast-track Ironic of the test's own (one boot of
// the ramdisk takes a node from inspection to active) and the images.
type sideDeployBed struct {
	ironic *ironic.Client
	images map[string]sideImage
	// imageAddr serves the images and is the guests' HTTP proxy.
	imageAddr string
	runs      int
}

func newSideDeployBed(t *testing.T, ctx context.Context) *sideDeployBed {
	t.Helper()
	ipaRamdisk(t)
	series, err := ironic.SeriesFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if !series.TokenOnGET() || series.HasInspector() {
		t.Skipf("SKIPPED: IPA 13 cleans and deploys only against an Ironic that sends the token on its GETs, and the one-boot flow uses Ironic's own inspection: IRONIC_SERIES=2026.1 (this run: %s)", series)
	}
	// One Ironic per test: TestVMIPADeploy and TestVMIPAMemory in one run
	// each start their own, and a second in the same directory finds the
	// first one's database.
	own := ironic.StartForTest(t, ctx, ironic.Config{Dir: filepath.Join(theSuite.dir, "ipa-deploy-ironic-"+t.Name()), Series: series,
		IronicPort: sideDeployIronicPort, FastTrack: true})
	reportSeconds(t, own.Took, "ironic_start_s")
	client := own.Ironic
	imgs, err := sideImages()
	if err != nil {
		t.Fatalf("the 1 GiB images: %v", err)
	}
	b := &sideDeployBed{ironic: client, images: imgs}
	b.imageAddr = serve(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, img := range imgs {
			if r.URL.Path == "/image."+img.format {
				http.ServeFile(w, r, img.path)
				return
			}
		}
		http.NotFound(w, r)
	}))
	return b
}

// sideFlowResult is one boot's way from inspection to active.
type sideFlowResult struct {
	inspect, clean, deploy time.Duration
	// memory is the agent's report of its peak memory at the power-off
	// that ends the deploy: ours logs peak_rss_kib, IPA's image prints
	// ipa-memory-report (iparamdisk).
	memory string
	// image is where the deploy's time went, from the agent's own log
	// lines on the console (imagePhases); imageSeconds their sum.
	image        string
	imageSeconds float64
}

// fatalConsole are console lines after which a run cannot complete (or
// completes only because a process was killed): the memory is too small.
var fatalConsole = []string{"Kernel panic", "Out of memory", "oom-kill", "Initramfs unpacking failed"}

// flow boots agent a once, in a machine of memMB, and takes a fresh node
// through inspection, automated cleaning (metadata erase on the six disks)
// and a deploy of the image in format to active (fast track: one boot).
// An error says which phase failed and why; the node and the VM's disks
// are gone when it returns.
func (b *sideDeployBed) flow(t *testing.T, ctx context.Context, a func(macs [2]string) sideAgent, memMB int, format string) (r sideFlowResult, err error) {
	t.Helper()
	b.runs++
	macs := [2]string{fmt.Sprintf("52:54:00:1d:%02x:01", b.runs), fmt.Sprintf("52:54:00:1d:%02x:02", b.runs)}
	agent := a(macs)
	img := b.images[format]
	agentPort := newAgentPort(t)
	m := serviceMachine(t, ramdisk(t), "bios", agentPort, macs)
	m.Kernel, m.Initrd = agent.kernel, agent.initrd
	m.MemoryMB = memMB
	name := fmt.Sprintf("%s-%s-%dm-%d", agent.name, format, memMB, b.runs)
	m.Dir = filepath.Join(vmDir(t), name)
	port := strconv.Itoa(sideDeployIronicPort)
	m.GuestFwd = map[string]string{guestHost + ":" + port: "127.0.0.1:" + port, guestHost + ":80": b.imageAddr}
	defer func() {
		// The deploy wrote 1 GiB into the target disk's file; the logs
		// stay for E2E_KEEP.
		for _, d := range m.Disks {
			_ = os.Remove(m.DiskPath(d.ID))
		}
	}()
	api := "http://" + guestHost + ":" + port
	m.Append = strings.Join([]string{"ipa-inspection-callback-url=" + api + "/v1/continue_inspection", "ipa-api-url=" + api,
		"ipa-advertise-host=127.0.0.1", "ipa-advertise-port=" + strconv.Itoa(agentPort), "ipa-lookup-timeout=900", agent.extra}, " ")

	node := ironic.Enroll(t, ctx, b.ironic, ironic.NodeSpec{Name: "side-deploy-" + name, InspectInterface: "agent",
		Properties: map[string]any{"capabilities": "boot_mode:bios"}}, macs[:]...)
	defer func() { _ = b.ironic.DeleteNode(context.Background(), node.UUID) }()
	// Fast track: the inspection's boot serves the cleaning and the
	// deploy; a run that cannot complete (too little memory) is an
	// outcome, so the driver's errors are returned, not fatal.
	var qemuStart time.Time
	d := &tblifecycle.Driver[*qemu.VM]{Ctx: ctx, Ironic: b.ironic, Node: node.UUID, FastTrack: true,
		Boot: func() (*qemu.VM, error) {
			qemuStart = time.Now()
			return qemu.Start(ctx, m, qemu.Options{})
		},
		Check: outOfMemory()}
	defer d.Stop()
	defer func() {
		if vms := d.Boots(); err != nil && len(vms) > 0 {
			vm := vms[len(vms)-1]
			t.Logf("%s: end of the serial console (all of it in %s):\n%s", name, vm.LogPath, consoleTail(vm, 30))
		}
	}()
	inspect, err := d.TryTo(nodes.ProvisionStateOpts{Target: nodes.TargetInspect}, 15*time.Minute)
	if err != nil {
		return r, fmt.Errorf("inspection: %w", err)
	}
	vm := inspect.Ramdisk
	r.inspect = time.Since(qemuStart)
	if err := nodes.Update(ctx, b.ironic.Service, node.UUID, append(imageInfoSums("http://"+b.imageAddr+"/image."+format, format, img.md5, img.sha256),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"serial": deployTarget}},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/image_http_proxy", Value: "http://" + guestHost + ":80"},
		// At the end of a BIOS deploy Ironic sets the boot device to
		// disk, which the fake management interface refuses.
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/management_interface", Value: "noop"},
	)).Err; err != nil {
		return r, err
	}
	phase := func(target nodes.TargetProvisionState, timeout time.Duration) (time.Duration, error) {
		if _, ok := d.Running(); !ok {
			// Fast track would boot another machine: the flow is one boot.
			return 0, fmt.Errorf("%s: the VM stopped before it", target)
		}
		s, err := d.TryTo(nodes.ProvisionStateOpts{Target: target}, timeout)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", target, err)
		}
		return s.Took, nil
	}
	if r.clean, err = phase(nodes.TargetProvide, 10*time.Minute); err != nil {
		return r, err
	}
	if r.deploy, err = phase(nodes.TargetActive, 20*time.Minute); err != nil {
		return r, err
	}
	// Ironic ends the deploy by having the agent power the machine off;
	// the agent's memory report comes on the way down.
	waitCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := vm.Wait(waitCtx); err != nil {
		t.Logf("%s: the VM did not power off after the deploy: %v", name, err)
	}
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, "ipa-memory-report:") || strings.Contains(l.Text, "peak_rss_kib=") {
			r.memory = strings.TrimSpace(l.Text)
		}
	}
	r.image, r.imageSeconds = imagePhases(vm.Lines())
	got, err := prefixSHA256(m.DiskPath(deployTargetID(t, m)), img.rawBytes)
	if err != nil {
		return r, err
	}
	if string(got) != string(img.rawSHA256) {
		return r, fmt.Errorf("the target disk does not hold the image after the %s deploy", format)
	}
	return r, nil
}

// outOfMemory is the deploy flow's lifecycle check (Driver.Check): a
// machine whose console shows it out of memory, or that has stopped,
// cannot complete the step. The agent powers the machine off as the
// deploy's last step and Ironic records active a moment later, so a
// stopped machine counts once it has been stopped for 30 s.
func outOfMemory() func(vm *qemu.VM) error {
	var stopped time.Time
	return func(vm *qemu.VM) error {
		for _, p := range fatalConsole {
			if l, ok := vm.Find(p); ok {
				return fmt.Errorf("the console says %q", strings.TrimSpace(l.Text))
			}
		}
		if exited, _ := vm.Exited(); !exited {
			return nil
		}
		if stopped.IsZero() {
			stopped = time.Now()
		}
		if time.Since(stopped) < 30*time.Second {
			return nil
		}
		return errors.New("the VM stopped")
	}
}

// sideAgentFor returns, for a run's MACs, the agent named name of
// sideAgents.
func sideAgentFor(t *testing.T, name string) func(macs [2]string) sideAgent {
	return func(macs [2]string) sideAgent {
		for _, a := range sideAgents(t, "bios", macs) {
			if a.name == name {
				return a
			}
		}
		t.Fatalf("no agent %q", name)
		return sideAgent{}
	}
}

// sideShipped is sideAgentFor booting what a server downloads, the
// bzImage and the gzip'ed initramfs, where the other tests boot the
// uncompressed forms when they can to save emulated time: the kernel
// holds the compressed archive and its unpacked files at once while it
// boots, so this is what the smallest memory must fit.
func sideShipped(t *testing.T, name string) func(macs [2]string) sideAgent {
	f := sideAgentFor(t, name)
	return func(macs [2]string) sideAgent {
		a := f(macs)
		if name == "ipa" {
			rd := ipaRamdisk(t)
			a.kernel, a.initrd = rd.Kernel, rd.Initrd
		} else {
			rd := ramdisk(t)
			a.kernel, a.initrd = rd.Kernel, rd.Initrd
		}
		return a
	}
}

// TestVMIPADeploy takes the same SeaBIOS machine (3 GiB, the six disks)
// from inspection through automated cleaning to active, once with a 1 GiB
// qcow2 image and once with the same image raw, with IPA 13's ramdisk and
// with ours, on one fast-track Ironic 2026.1 (one boot per run), and
// reports each phase's time and the agent's peak memory at the power-off
// that ends the deploy (ours: its peak_rss_kib log line; IPA: its process's
// VmHWM and its unit's cgroup memory.peak, printed by IPA's image). The
// disk is checked to hold the image. IPA_SIDE_BY_SIDE=1 only.
//
// $IPA_SIDE_DEPLOY_RUNS picks runs, agent:format separated by commas
// (default ipa:qcow2,ipa:raw,ours:qcow2,ours:raw).
func TestVMIPADeploy(t *testing.T) {
	runs := "ipa:qcow2,ipa:raw,ours:qcow2,ours:raw"
	if v := os.Getenv("IPA_SIDE_DEPLOY_RUNS"); v != "" {
		runs = v
	}
	type run struct{ agent, format string }
	var todo []run
	for _, r := range strings.Split(runs, ",") {
		name, format, _ := strings.Cut(strings.TrimSpace(r), ":")
		if (name != "ipa" && name != "ours") || (format != "qcow2" && format != "raw") {
			t.Fatalf("IPA_SIDE_DEPLOY_RUNS=%q: %q is not agent:format (agent ipa or ours, format qcow2 or raw)", runs, r)
		}
		todo = append(todo, run{name, format})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Minute)
	defer cancel()
	b := newSideDeployBed(t, ctx)
	for _, run := range todo {
		name, format := run.agent, run.format
		r, err := b.flow(t, ctx, sideAgentFor(t, name), sideDeployMemoryMB, format)
		if err != nil {
			t.Errorf("%s, %s image, %d MiB: %v", name, format, sideDeployMemoryMB, err)
			continue
		}
		t.Logf("deploy %s %s (%d MiB, 1 GiB %s, %.0f MiB file): %s; memory: %s", format, name, sideDeployMemoryMB, format, mib(b.images[format].size), r.image, r.memory)
		reportSeconds(t, r.inspect, name, format, "inspection_s")
		reportSeconds(t, r.clean, name, format, "cleaning_s")
		reportSeconds(t, r.deploy, name, format, "deploy_s")
		if r.imageSeconds > 0 {
			// The image's way from the server to the disk, as each agent
			// logs it.
			reportSide(t, name, float64(sideImageSize)/1e6/r.imageSeconds, "MB/s", format, "image_mb_s")
		}
	}
}

// sideMemoryRanges are where TestVMIPAMemory bisects each agent's smallest
// memory, in MiB: below lo assumed to fail, hi assumed to pass (hi is
// within TestVMIPADeploy's 3 GiB, where both pass).
var sideMemoryRanges = map[string][2]int{"ipa": {1024, 3072}, "ours": {128, 512}}

// TestVMIPAMemory bisects, for IPA 13 and ours, the smallest VM memory with
// which one boot completes inspection, automated cleaning and the deploy
// of the 1 GiB qcow2 image (TestVMIPADeploy's flow) without the kernel's
// OOM killer, booting the bzImage and gzip'ed initramfs a server downloads
// (sideShipped): $IPA_SIDE_MEMORY_STEPS boots per agent (default 3),
// rounded to 32 MiB, within sideMemoryRanges. IPA_SIDE_BY_SIDE=1 only.
//
// $IPA_SIDE_MEMORY_AGENTS picks the agents, separated by commas (default
// ipa,ours).
func TestVMIPAMemory(t *testing.T) {
	steps := 3
	if v := os.Getenv("IPA_SIDE_MEMORY_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 8 {
			t.Fatalf("IPA_SIDE_MEMORY_STEPS=%q: want a number of boots from 1 to 8", v)
		}
		steps = n
	}
	agents := []string{"ipa", "ours"}
	if v := os.Getenv("IPA_SIDE_MEMORY_AGENTS"); v != "" {
		agents = nil
		for _, a := range strings.Split(v, ",") {
			a = strings.TrimSpace(a)
			if _, ok := sideMemoryRanges[a]; !ok {
				t.Fatalf("IPA_SIDE_MEMORY_AGENTS=%q: %q is not an agent (ipa or ours)", v, a)
			}
			agents = append(agents, a)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Minute)
	defer cancel()
	b := newSideDeployBed(t, ctx)
	for _, name := range agents {
		lo, hi := sideMemoryRanges[name][0], sideMemoryRanges[name][1]
		var tried []string
		for range steps {
			mid := (lo + hi) / 2 / 32 * 32
			if mid <= lo || mid >= hi {
				break
			}
			start := time.Now()
			r, err := b.flow(t, ctx, sideShipped(t, name), mid, "qcow2")
			if err != nil {
				t.Logf("%s at %d MiB: fails: %v", name, mid, err)
				tried = append(tried, fmt.Sprintf("%d fails", mid))
				lo = mid
				continue
			}
			t.Logf("%s at %d MiB: completes in %s; memory: %s", name, mid, time.Since(start).Round(time.Second), r.memory)
			tried = append(tried, fmt.Sprintf("%d completes", mid))
			hi = mid
		}
		t.Logf("smallest memory %s: completes with %d MiB, not with %d MiB (%s; %d MiB resolution)", name, hi, lo, strings.Join(tried, ", "), hi-lo)
		reportValue(t, float64(hi), "MiB", name, "smallest_memory")
	}
}

// imagePhaseLines are the agents' log lines that time the image's way to
// the disk: IPA 13's standby.py ("Image downloaded from URL in N seconds"
// before a qemu-img convert, "Image streamed onto device DEV in N seconds",
// "Image ID written to device DEV in N seconds") and ours (deploy/image's
// summary: "... written to DEV in Ns, N MB/s").
var imagePhaseLines = []struct {
	name string
	re   *regexp.Regexp
}{
	{"download into RAM", regexp.MustCompile(`Image downloaded from \S+ in ([0-9.]+) seconds`)},
	{"streamed", regexp.MustCompile(`Image streamed onto device \S+ in ([0-9.]+) seconds`)},
	{"written to the disk", regexp.MustCompile(`Image \S+ written to device \S+ in ([0-9.]+) seconds`)},
	{"written", regexp.MustCompile(`written to \S+ in ([0-9.]+s, [0-9.]+ MB/s)`)},
}

// imagePhases is what the agent's console lines say of its image write,
// e.g. "download into RAM 39.8s, written to the disk 62.6s", or "no
// image log line" when it printed none; seconds is the phases' sum, the
// image's way from the server to the disk (0 without a line).
func imagePhases(lines []qemu.Line) (text string, seconds float64) {
	var out []string
	// The same summary can reach the console twice (the step's log line
	// and the command's result); each phase is said once.
	seen := map[string]bool{}
	for _, l := range lines {
		for _, p := range imagePhaseLines {
			if m := p.re.FindStringSubmatch(l.Text); m != nil {
				v := m[1]
				secs, _, _ := strings.Cut(v, "s,")
				f, err := strconv.ParseFloat(secs, 64)
				if err == nil && secs == v {
					v = fmt.Sprintf("%.1fs", f)
				}
				if phase := p.name + " " + v; !seen[phase] {
					seen[phase] = true
					out = append(out, phase)
					if err == nil {
						seconds += f
					}
				}
				break
			}
		}
	}
	if len(out) == 0 {
		return "no image log line", 0
	}
	return strings.Join(out, ", "), seconds
}

func TestImagePhases(t *testing.T) {
	for _, c := range []struct {
		lines   []string
		want    string
		seconds float64
	}{
		{[]string{
			"[  200.1] ironic-python-agent[612]: 2026-11-25 16:00:01.123 612 INFO ironic_python_agent.extensions.standby [-] Image downloaded from http://10.0.2.100/image.qcow2 in 39.84 seconds. Transferred 1074135040 bytes. Server originally reported: 1074135040.",
			"[  223.0] ironic-python-agent[612]: 2026-11-25 16:00:24.0 612 INFO ironic_python_agent.extensions.standby [-] Image b8c1 written to device /dev/sdb in 62.61 seconds",
		}, "download into RAM 39.8s, written to the disk 62.6s", 39.84 + 62.61},
		{[]string{"ironic-python-agent[612]: ... Image streamed onto device /dev/sdb in 61.2 seconds for 1073741824 bytes. Server originally reported 1073741824."},
			"streamed 61.2s", 61.2},
		{[]string{`time=2026-11-25T16:00:00Z level=INFO msg="image written" summary="raw image b8c1 of 1073741824 bytes (raw image, 1073741824 bytes on disk) written to /dev/sdb in 140.2s, 8 MB/s"`,
			`time=2026-11-25T16:00:00Z level=INFO msg="async command finished" result="raw image b8c1 of 1073741824 bytes (raw image, 1073741824 bytes on disk) written to /dev/sdb in 140.2s, 8 MB/s"`},
			"written 140.2s, 8 MB/s", 140.2},
		{[]string{"nothing here"}, "no image log line", 0},
	} {
		var lines []qemu.Line
		for _, l := range c.lines {
			lines = append(lines, qemu.Line{Text: l})
		}
		if got, secs := imagePhases(lines); got != c.want || math.Abs(secs-c.seconds) > 1e-9 {
			t.Errorf("imagePhases(%q) = %q, %v; want %q, %v", c.lines, got, secs, c.want, c.seconds)
		}
	}
}
