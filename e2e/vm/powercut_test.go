package vm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/agent/command"
	"github.com/ironic-go/ironic-agent/deploy/image"
	"github.com/ironic-go/ironic-agent/internal/testbed/bmcsim"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// Ports of TestVMPowerCut (the vm range, moved by $E2E_PORT_OFFSET).
var (
	powerCutIronicPort = portOffset() + 9580
	powerCutAgentPort  = portOffset() + 9581
	powerCutBMCLANPort = portOffset() + 9582 // UDP, ipmi_sim's LAN channel
	powerCutBMCVMPort  = portOffset() + 9583 // TCP on 127.0.0.1, ipmi_sim's end of ipmi-bmc-extern
)

const (
	// powerCutDisk is the serial of the machine's only disk: cleaning
	// shreds it, the root-device hint deploys onto it.
	powerCutDisk = "LAB-PCUT-0001"
	// powerCutDiskMB makes the shred (one random pass, one zero pass)
	// last well past the agent's first erase progress line (10 s).
	powerCutDiskMB = 1024
	// powerCutImageRate is the image server's rate (bytes/s) for the
	// deploy whose power is cut: a 16 MiB image then takes 32 s, so the
	// cut after the first progress line (10 s) lands mid-write.
	powerCutImageRate = 512 << 10
)

// TestVMPowerCut is issue 13 §5: with Ironic holding the power through
// its ipmi hardware type (ipmitool against OpenIPMI's ipmi_sim), the BMC
// is told over its LAN channel to cut the power, as an operator or a PDU
// would, in the middle of a step; Ironic's own recovery then succeeds on
// the next boot, and nothing of the cut boot is seen by the next one.
// The scenario runs under each firmware (a subtest each: SeaBIOS, whose
// deployed disk's boot sector prints a marker, and OVMF, whose deployed
// disk is internal/testbed/osimage's UEFI disk, booted through the NVRAM entry
// the retried deploy wrote):
//
//  1. Automated cleaning with erase_devices: the cut lands after the
//     agent's first erase progress line. Power sync skips nodes in clean
//     wait, so Ironic notices only when the heartbeats have been missing
//     for its callback timeout: clean failed, and Ironic 21.4 also sets
//     maintenance. Maintenance off, manage, provide: a fresh boot cleans
//     the whole disk and the node is available.
//  2. A deploy whose image is served slowly: the cut lands after the
//     agent's first "writing image" progress line; Ironic fails the
//     deploy the same way. Deploying again writes the whole image (no
//     "already written"), and Ironic boots the node from its disk, which
//     proves it booted.
//
// After each cut the disk file shows a half-done step: the erase reached
// 16 MiB and had not zeroed the disk; the bytes the agent reported
// written are on the disk and the whole image is not. Each retry boot
// reports no step of the cut boot as interrupted, takes a token from its
// own lookup, and none of its commands fails; the disk is all zeros after
// cleaning and holds the image after the deploy.
func TestVMPowerCut(t *testing.T) {
	slowScenario(t)
	for _, fw := range []powerCutFirmware{
		{name: "bios", image: powerCutBIOSImage, booted: diskBootMarker, callbackTimeout: 75 * time.Second},
		// Under UEFI the agent moves the GPT's backup header to the end
		// of the disk, rewriting the protective MBR and the primary
		// header (see TestVMDeployUEFI): the image is compared from
		// LBA 2. OVMF takes about 50 s under TCG at load 13 before the
		// kernel's EFI stub runs, and the agent starts 80 s after the
		// power-on: 75 s failed the cleaning before the first
		// heartbeat.
		{name: "uefi", image: powerCutUEFIImage, booted: osimage.Booted, compareFrom: 1024, callbackTimeout: 150 * time.Second},
	} {
		t.Run(fw.name, func(t *testing.T) { powerCutScenario(t, fw) })
	}
}

// powerCutFirmware is what TestVMPowerCut's scenario changes with the
// firmware.
type powerCutFirmware struct {
	name string // vmtest's firmware: bios or uefi
	// image is the whole-disk image to deploy (at least 16 MiB, so the
	// slow transfer is cut mid-write).
	image func(t *testing.T, ctx context.Context) []byte
	// booted is the console line that shows the deployed disk booted.
	booted string
	// compareFrom is where the disk must equal the image after the
	// deploy: what the agent rewrites after the write comes before it.
	compareFrom int
	// callbackTimeout is Ironic's clean and deploy callback timeout:
	// how long after the last heartbeat of a cut machine Ironic gives
	// up. Long enough for a boot to its first heartbeat at load.
	callbackTimeout time.Duration
}

func powerCutScenario(t *testing.T, fw powerCutFirmware) {
	rd := ramdisk(t)
	for _, p := range []string{"ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (Debian packages openipmi and ipmitool; in test.sh)", p)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: installs and runs Debian's Ironic")
	}
	if series, err := ironic.SeriesFromEnv(); err != nil || !series.Host() {
		t.Skipf("SKIPPED: the ipmi hardware type runs with the host's Ironic (2023.1) only, not %s (%v)", series, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	testStart := time.Now()

	own := ironic.StartForTest(t, ctx, ironic.Config{Dir: filepath.Join(theSuite.dir, "powercut-services-"+fw.name), IronicPort: powerCutIronicPort,
		NoInspector: true, IPMI: true, EraseDevicesPriority: 10, CallbackTimeout: fw.callbackTimeout})
	reportSeconds(t, own.Took, "ironic_start_s")
	client := own.Ironic

	img := fw.image(t, ctx)
	var rate atomic.Int64
	images := serve(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/deploy.kernel":
			http.ServeFile(w, r, rd.KernelFor(qemu.Firmware(fw.name)))
		case "/deploy.initramfs":
			http.ServeFile(w, r, rd.InitrdFor(qemu.Firmware(fw.name)))
		case "/image.raw":
			http.ServeContent(w, r, "image.raw", time.Time{}, &throttledReader{r: bytes.NewReader(img), rate: &rate})
		default:
			http.NotFound(w, r)
		}
	}))

	macs := newMACs(t)
	m := qemu.DefaultMachine(qemu.Firmware(fw.name))
	m.Name = "ironic-agent-powercut-" + fw.name
	m.Dir = vmDir(t)
	m.MemoryMB = 768
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.NICs[0].MAC, m.NICs[1].MAC = macs[0], macs[1]
	m.Disks = []qemu.Disk{{ID: "disk", Kind: qemu.DiskVirtioBlk, SizeMB: powerCutDiskMB, Serial: powerCutDisk}}
	m.GuestFwd = map[string]string{
		guestHost + ":" + strconv.Itoa(powerCutIronicPort): "127.0.0.1:" + strconv.Itoa(powerCutIronicPort),
		// The image server doubles as the agent's HTTP proxy (see deployVM).
		guestHost + ":80": images,
	}
	m.HostFwd = map[int]int{powerCutAgentPort: 9999}
	m.BMC = &qemu.BMC{Kind: qemu.BMCOpenIPMI, MfgID: 0xc0de, ProductID: 0x0b0d,
		LANAddress: "127.95.41.1", LANPort: powerCutBMCLANPort, LANMAC: "02:00:00:95:41:01",
		User: "ironic", Password: "ipmi-s3cret", VMPort: powerCutBMCVMPort}
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	diskPath := m.DiskPath("disk")
	// Data for the erase to destroy, at the start and near the end (the
	// metadata erase alone clears the last 64 KiB, not this).
	writeAt(t, diskPath, 16<<20, pattern(1<<20, 0xa5))
	writeAt(t, diskPath, -(8 << 20), pattern(1<<20, 0xa5))

	bmc, err := bmcsim.StartIPMISim(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("BMC events: %s", strings.Join(bmc.Events(), "; "))
			if vm := bmc.VM(); vm != nil {
				t.Logf("serial console of the last boot (end; all of it in %s):\n%s", vm.LogPath, consoleTail(vm, 80))
			}
		}
		bmc.Close()
	})

	node := ironic.Enroll(t, ctx, client, ironic.NodeSpec{Name: "vm-powercut-" + fw.name,
		Properties: map[string]any{"capabilities": "boot_mode:" + fw.name, "vendor": nil},
		IPMI: map[string]any{
			"ipmi_address": m.BMC.LANAddress, "ipmi_port": m.BMC.LANPort,
			"ipmi_username": m.BMC.User, "ipmi_password": m.BMC.Password,
			// ipmi_sim has no SHA-256 suite (see TestVMIPMIBIOS).
			"ipmi_cipher_suite": 3,
			"deploy_kernel":     "http://" + images + "/deploy.kernel",
			"deploy_ramdisk":    "http://" + images + "/deploy.initramfs",
		}}, macs[:]...)
	l := bmcLifecycle(t, ctx, client, node.UUID, ipmiPower, kernelBoot, bmc)
	// What Ironic's PXE configuration would give the ramdisk. No disk here
	// is the 4 GiB a root disk needs without hints: one look, not ten.
	l.machine.Append = strings.Join([]string{
		"ipa-api-url=http://" + guestHost + ":" + strconv.Itoa(powerCutIronicPort),
		"ipa-advertise-host=127.0.0.1", "ipa-advertise-port=" + strconv.Itoa(powerCutAgentPort),
		"ipa-lookup-timeout=900", "ipa-disk-wait-attempts=1", "ironic_agent.dhcp=" + macs[0],
	}, " ")
	pc := powerCut{t: t, ctx: ctx, client: client, node: node.UUID, bmc: bmc, m: m, callbackTimeout: fw.callbackTimeout}

	// 1. Cleaning, cut mid-erase.
	start := time.Now()
	l.Start(nodes.ProvisionStateOpts{Target: nodes.TargetProvide})
	vm := l.PowerOn(1)
	progress := pc.waitLine(vm, 5*time.Minute, func(l string) bool { return strings.Contains(l, logtext.Msg(agent.EventEraseProgress)+` device=`) },
		"clean", "erase_devices")
	t.Logf("cleaning boot: first erase progress: %s", logFields(progress.Text))
	reportSeconds(t, progress.At, "cleaning_first_erase_progress_s")
	cut := pc.cut()
	failed := pc.waitFailed("clean failed")
	t.Logf("cleaning cut; Ironic: clean failed (%s)", failed.LastError)
	reportSeconds(t, cut.Sub(start), "cleaning_cut_s")
	reportSeconds(t, time.Since(cut), "cleaning_cut_to_clean_failed_s")
	// The erase had started (the pattern near the start is gone) and had
	// not finished (the disk is not all zeros).
	if bytes.Equal(readAt(t, diskPath, 16<<20, 1<<20), pattern(1<<20, 0xa5)) {
		t.Error("after the cut: the erase progress line was printed, yet the data at 16 MiB is intact")
	}
	if allZero(t, diskPath) {
		t.Error("after the cut the disk is all zeros: the erase finished before the power went, the cut was not mid-step")
	}
	start = time.Now()
	// Ironic 21.4 puts a node whose cleaning timed out into maintenance
	// (fault "clean failure"); the operator takes it out before manage.
	if failed.Maintenance {
		if err := nodes.UnsetMaintenance(ctx, client.Service, node.UUID).ExtractErr(); err != nil {
			t.Fatal(err)
		}
	}
	l.Change(nodes.ProvisionStateOpts{Target: nodes.TargetManage}, time.Minute)
	vm = l.Provide(10 * time.Minute).VM
	pc.waitOff()
	pc.freshBoot(vm)
	if _, ok := stepCompleted(vm, "clean", "erase_devices"); !ok {
		t.Error("the retried cleaning reached available without the agent completing erase_devices")
	}
	if !allZero(t, diskPath) {
		t.Error("after the retried cleaning the disk is not all zeros")
	}
	reportSeconds(t, time.Since(start), "cleaning_retry_s")

	// 2. A deploy, cut mid-write_image.
	ops := append(imageInfo("http://"+images+"/image.raw", img),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"serial": powerCutDisk}},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/image_http_proxy", Value: "http://" + guestHost + ":80"},
	)
	if err := nodes.Update(ctx, client.Service, node.UUID, ops).Err; err != nil {
		t.Fatal(err)
	}
	rate.Store(powerCutImageRate)
	start = time.Now()
	l.Start(nodes.ProvisionStateOpts{Target: nodes.TargetActive})
	vm = l.PowerOn(1)
	progress = pc.waitLine(vm, 5*time.Minute, func(l string) bool {
		return strings.Contains(l, logtext.Msg(agent.EventWritingImage)) && logInt(l, "written") > 0
	}, "deploy", "write_image")
	written := logInt(progress.Text, "written")
	t.Logf("deploy boot: first write progress: %s", logFields(progress.Text))
	reportSeconds(t, progress.At, "deploy_first_write_progress_s")
	cut = pc.cut()
	rate.Store(0)
	failed = pc.waitFailed("deploy failed")
	t.Logf("deploy cut; Ironic: deploy failed (%s)", failed.LastError)
	reportSeconds(t, cut.Sub(start), "deploy_cut_s")
	reportSeconds(t, time.Since(cut), "deploy_cut_to_deploy_failed_s")
	// The write had started (what the agent reported written is on the
	// disk) and had not finished (the disk, all zeros before, does not
	// hold the whole image).
	if n := min(int(written), len(img)); !bytes.Equal(readAt(t, diskPath, 512, n-512), img[512:n]) {
		t.Errorf("after the cut: the agent reported %d bytes written, the disk does not hold them", written)
	}
	if bytes.Equal(readAt(t, diskPath, int64(fw.compareFrom), len(img)-fw.compareFrom), img[fw.compareFrom:]) {
		t.Error("after the cut the disk holds the whole image: the write finished before the power went")
	}
	start = time.Now()
	if failed.Maintenance {
		if err := nodes.UnsetMaintenance(ctx, client.Service, node.UUID).ExtractErr(); err != nil {
			t.Fatal(err)
		}
	}
	vm = l.Deploy(10 * time.Minute).VM
	deployed := time.Since(start)
	pc.freshBoot(vm)
	if _, ok := vm.Find(logtext.Msg(image.EventImageWritten)); !ok {
		t.Error("the deploy retry reached active without the agent writing the image")
	}
	if l, ok := vm.Find(logtext.Msg(agent.EventImageAlreadyWritten)); ok {
		t.Errorf("the deploy retry took the cut boot's image as written: %s", l.Text)
	}
	// Ironic ends the deploy by booting the node from its disk.
	disk := l.PowerOn(2)
	lctx, lcancel := context.WithTimeout(ctx, 2*time.Minute)
	_, err = disk.WaitFor(lctx, fw.booted)
	lcancel()
	if err != nil {
		t.Errorf("the deployed disk did not boot: %v", err)
	}
	if err := nodes.ChangePowerState(ctx, client.Service, node.UUID, nodes.PowerStateOpts{Target: nodes.PowerOff}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	pc.waitOff()
	if got, want := readAt(t, diskPath, int64(fw.compareFrom), len(img)-fw.compareFrom), img[fw.compareFrom:]; !bytes.Equal(got, want) {
		n := 0
		for n < len(got) && got[n] == want[n] {
			n++
		}
		t.Errorf("after the retried deploy the disk does not hold the image: first difference at byte %d", fw.compareFrom+n)
	}
	t.Logf("deploy retry: active, deployed disk booted; BMC events: %s", strings.Join(bmc.Events(), "; "))
	reportSeconds(t, deployed, "deploy_retry_s")
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}

// powerCut is what the steps of TestVMPowerCut share.
type powerCut struct {
	t      *testing.T
	ctx    context.Context
	client *ironic.Client
	node   string
	bmc    *bmcsim.IPMISim
	m      qemu.Machine
	// callbackTimeout is Ironic's ([conductor]clean_callback_timeout).
	callbackTimeout time.Duration
}

// waitLine waits for the first console line of vm that match accepts and
// fails if kind's step completes first or the machine goes off.
func (pc powerCut) waitLine(vm *qemu.VM, timeout time.Duration, match func(string) bool, kind, step string) qemu.Line {
	pc.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, l := range vm.Lines() {
			if match(l.Text) {
				return l
			}
		}
		if l, ok := stepCompleted(vm, kind, step); ok {
			pc.t.Fatalf("the step ended before its first progress line, too fast to cut mid-step: %s", l.Text)
		}
		if !pc.bmc.On() || time.Now().After(deadline) || pc.ctx.Err() != nil {
			pc.t.Fatalf("no progress line of %s step %s within %s (machine on: %v)", kind, step, timeout, pc.bmc.On())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cut has the BMC power the machine off as an operator would, with
// ipmitool over the LAN channel (the address Ironic uses), and returns
// when it is off.
func (pc powerCut) cut() time.Time {
	pc.t.Helper()
	b := pc.m.BMC
	at := time.Now()
	ctx, cancel := context.WithTimeout(pc.ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ipmitool", "-I", "lanplus", "-C", "3", "-H", b.LANAddress, "-p", strconv.Itoa(b.LANPort),
		"-U", b.User, "-P", b.Password, "chassis", "power", "off").CombinedOutput()
	if err != nil {
		pc.t.Fatalf("ipmitool chassis power off: %v: %s", err, out)
	}
	pc.waitOff()
	pc.t.Logf("power cut by ipmitool: %s", strings.TrimSpace(string(out)))
	reportSeconds(pc.t, time.Since(at), "power_cut_s")
	return at
}

func (pc powerCut) waitOff() {
	pc.t.Helper()
	ctx, cancel := context.WithTimeout(pc.ctx, 2*time.Minute)
	defer cancel()
	if err := pc.bmc.WaitOff(ctx); err != nil {
		pc.t.Fatal(err)
	}
}

// waitFailed waits for Ironic to give up on the cut node (its callback
// timeout, checked every 10 s) and checks why it did.
func (pc powerCut) waitFailed(state string) *nodes.Node {
	pc.t.Helper()
	n, err := pc.client.WaitFor(pc.ctx, pc.node, pc.callbackTimeout+3*time.Minute, state+" with a last_error", func(n *nodes.Node) bool {
		return n.ProvisionState == state && n.LastError != ""
	})
	if err != nil {
		pc.t.Fatal(err)
	}
	if !strings.Contains(n.LastError, "Timeout reached") {
		pc.t.Errorf("%s: last_error %q, want Ironic's timeout", state, n.LastError)
	}
	if pc.bmc.On() {
		pc.t.Errorf("%s: the machine is on again", state)
	}
	pc.t.Logf("%s: Ironic's power state %q, maintenance %v (fault %q)", state, n.PowerState, n.Maintenance, n.Fault)
	return n
}

// freshBoot checks that the boot after a cut started clean: it reported
// no step of an earlier process as interrupted, its lookup brought a token
// of its own (Ironic accepts heartbeats only with it), and none of its
// commands failed.
func (pc powerCut) freshBoot(vm *qemu.VM) {
	pc.t.Helper()
	if l, ok := vm.Find(logtext.Msg(agent.EventUnfinishedStepFailed)); ok {
		pc.t.Errorf("the boot after the cut reports a step of the cut boot: %s", l.Text)
	}
	if _, ok := vm.Find(logtext.Msg(agent.EventTokenReceived)); !ok {
		pc.t.Error("the boot after the cut got no agent token from its lookup")
	}
	var commands []string
	for _, l := range vm.Lines() {
		if !strings.Contains(l.Text, logtext.Msg(command.EventAsyncCommandFinished)) {
			continue
		}
		commands = append(commands, logField(l.Text, "command")+" "+logField(l.Text, "status"))
		if logField(l.Text, "status") != "SUCCEEDED" {
			pc.t.Errorf("the boot after the cut has a command that did not succeed: %s", l.Text)
		}
	}
	pc.t.Logf("boot after the cut: %d asynchronous commands [%s]", len(commands), strings.Join(commands, ", "))
}

// throttledReader serves its bytes at rate bytes per second (0: at once).
type throttledReader struct {
	r    *bytes.Reader
	rate *atomic.Int64
}

func (t *throttledReader) Read(p []byte) (int, error) {
	if bps := t.rate.Load(); bps > 0 {
		p = p[:min(len(p), 64<<10)]
		time.Sleep(time.Duration(len(p)) * time.Second / time.Duration(bps))
	}
	return t.r.Read(p)
}

func (t *throttledReader) Seek(off int64, whence int) (int64, error) { return t.r.Seek(off, whence) }

// powerCutBIOSImage is a 16 MiB whole-disk image: the boot sector of
// markerBootSector (so the deployed disk proves it booted), one Linux
// partition (prepare_image wants a partition table), random bytes.
func powerCutBIOSImage(t *testing.T, _ context.Context) []byte {
	const size = 16 << 20
	img := make([]byte, size)
	r := rand.NewChaCha8([32]byte{'p', 'c', 'u', 't'})
	_, _ = r.Read(img)
	copy(img, markerBootSector(t))
	img[446+4] = 0x83
	binary.LittleEndian.PutUint32(img[446+8:], 2048)
	binary.LittleEndian.PutUint32(img[446+12:], size/512-2048)
	return img
}

// powerCutUEFIImage is internal/testbed/osimage's UEFI whole-disk image.
func powerCutUEFIImage(t *testing.T, ctx context.Context) []byte {
	_, img := osImageUEFI(t, ctx)
	return img
}

// osImageUEFI builds internal/testbed/osimage's UEFI whole-disk image (42 MiB:
// GPT, an ESP with GRUB and its BOOTX64.CSV, the OS's root file system)
// in a temporary directory and returns its file and bytes; it skips t
// when a host program the image needs is missing.
func osImageUEFI(t *testing.T, ctx context.Context) (string, []byte) {
	t.Helper()
	if m := osimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (in test.sh)", m)
	}
	dir := t.TempDir()
	o, err := osimage.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(dir, "uefi.raw")
	if err := o.UEFIDisk(ctx, dir, raw); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	return raw, img
}

// allZero reports whether the file at path holds only zero bytes.
func allZero(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4<<20)
	zero := make([]byte, len(buf))
	for {
		n, err := f.Read(buf)
		if !bytes.Equal(buf[:n], zero[:n]) {
			return false
		}
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// stepCompleted finds the agent's line saying kind's step completed
// (the step by its whole name: erase_devices is not
// erase_devices_metadata).
func stepCompleted(vm *qemu.VM, kind, step string) (qemu.Line, bool) {
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, logtext.Msg(agent.EventStepCompleted)) && logField(l.Text, "kind") == kind && logField(l.Text, "step") == step {
			return l, true
		}
	}
	return qemu.Line{}, false
}

// logInt is the integer value of key=N in an agent log line, -1 without.
func logInt(line, key string) int64 {
	n, err := strconv.ParseInt(logField(line, key), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// logFields is an agent log line from its message on.
func logFields(line string) string {
	if i := strings.Index(line, "msg="); i >= 0 {
		return line[i:]
	}
	return line
}
