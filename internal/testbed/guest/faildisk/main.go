// Command faildiskguest is the /init of the ramdisk TestFailingDisks
// boots: the agent ramdisk's init as PID 1, which runs "faildiskguest
// check". That builds a device-mapper disk over the VM's virtio disk
// (internal/devmapper, internal/dmtest), a loop device with partitions over it, and runs the
// agent in this process, confined to the loop device, against a fake
// Ironic API here (lookup, heartbeats). Each scenario swaps the dm table
// (an error range, the whole disk turned to error while a write runs, a
// dm-delay disk), posts one command through the agent's REST API as
// Ironic would, and checks what it ended with; then the multipath path
// checker runs against two device-mapper paths that fail and come back
// (multipath.go). It prints
// "faildisk: ok NAME SECONDS DETAIL" or "faildisk: fail NAME SECONDS WHY"
// per scenario and "faildisk: done" at the end; the host test reads those.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/internal/devmapper"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/dmtest"
	"github.com/ironic-go/ironic-agent/internal/testbed/fakeironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/inventory"
	"golang.org/x/sys/unix"
)

const (
	baseDisk = "/dev/vda"
	// diskSectors is the dm disk, the whole virtio disk: room for a 12 MiB
	// image and a 64 MiB config drive partition at the end.
	diskSectors = 192 << 20 / 512
	// cdStart is where the config drive partition starts: the last 64 MiB.
	cdStart  = diskSectors - 64<<20/512
	nodeUUID = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	token    = "faildisk-token-0123456789abcdef0123456789"
	mac      = "52:54:00:fa:11:01"
	// hbTimeout makes the agent heartbeat every 3-6 s.
	hbTimeout = 10
	// maxHeartbeatGap is the longest silence allowed while a command runs.
	maxHeartbeatGap = 15 * time.Second
	imageDir        = "/faildisk"
)

func main() {
	if os.Getpid() == 1 {
		err := rdinit.Main(context.Background(), os.Stdout, nil)
		fmt.Println("faildiskguest init:", err)
		_ = rdinit.Halt(false)
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "check" {
		fmt.Fprintln(os.Stderr, "usage: faildiskguest check (in the test's ramdisk)")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Println("faildisk: setup failed:", oneLine(err.Error()))
		printKernelLog()
	}
	fmt.Println("faildisk: done")
}

// printKernelLog prints the kernel's messages about device-mapper and
// loop devices (the console runs quiet): why a table was refused.
func printKernelLog() {
	buf := make([]byte, 1<<20)
	n, err := unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf)
	if err != nil {
		fmt.Println("faildisk: kernel log:", err)
		return
	}
	for _, l := range strings.Split(string(buf[:n]), "\n") {
		if strings.Contains(l, "device-mapper") || strings.Contains(l, "loop") || strings.Contains(l, "I/O error") {
			fmt.Println("faildisk: kernel:", l)
		}
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// syncBuffer is the agent's log, kept for the scenarios to read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) since(off int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()[off:]
}

func (s *syncBuffer) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// heartbeatGap returns the number of heartbeats f received in [from, to]
// and the longest silence in that window (its ends included).
func heartbeatGap(f *fakeironic.Server, from, to time.Time) (int, time.Duration) {
	last, n, longest := from, 0, time.Duration(0)
	for _, h := range f.Heartbeats() {
		t := h.At
		if t.Before(from) || t.After(to) {
			continue
		}
		n++
		longest = max(longest, t.Sub(last))
		last = t
	}
	return n, max(longest, to.Sub(last))
}

// newFakeIronic is the Ironic of the scenarios: the node with no
// properties and no driver_internal_info (the steps get their node from
// the scenario's own commands), heartbeating every 3-6 s.
func newFakeIronic() *fakeironic.Server {
	return &fakeironic.Server{NodeUUID: nodeUUID, Token: token, HeartbeatTimeout: hbTimeout,
		Node: map[string]any{"properties": map[string]any{}, "driver_internal_info": map[string]any{}}}
}

func serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

// bed is what the scenarios share.
type bed struct {
	dm      *devmapper.Device
	loop    string
	agent   string // the agent's API URL
	ironic  *fakeironic.Server
	images  string // URL of imageDir
	log     *syncBuffer
	posted  []string          // command names posted, in order
	results map[string]string // command id -> status it ended with
}

func run(ctx context.Context) error {
	ctl, err := devmapper.Open()
	if err != nil {
		return err
	}
	v, _ := ctl.Version()
	fmt.Println("faildisk: device-mapper", v)
	dm, err := ctl.Create(ctx, "faildisk", "", linear())
	if err != nil {
		return err
	}
	loop, err := dmtest.AttachLoop(ctx, dm.Path)
	if err != nil {
		return err
	}
	fmt.Println("faildisk: disk", loop.Path, "over", dm.Path, "over", baseDisk)
	b := &bed{dm: dm, loop: loop.Path, ironic: newFakeIronic(), log: &syncBuffer{}, results: map[string]string{}}
	ironicURL, err := serve(b.ironic)
	if err != nil {
		return err
	}
	if b.images, err = serve(http.FileServer(http.Dir(imageDir))); err != nil {
		return err
	}
	cfg, err := config.Load(config.Inputs{Flags: map[string]string{
		"api_url": ironicURL, "allowed_devices": loop.Path, "advertise_host": "127.0.0.1", "listen_host": "127.0.0.1",
		"enable_auto_tls": "false",
	}})
	if err != nil {
		return err
	}
	state, err := os.MkdirTemp("", "agent-state-")
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(os.Stdout, b.log), &slog.HandlerOptions{Level: slog.LevelInfo}))
	ready := make(chan string, 1)
	a, err := agent.New(ctx, agent.Options{
		Config: cfg, Log: log, StateRoot: state, SkipRAIDAssembly: true, DisableMultipath: true,
		Hooks: agent.Hooks{
			Machine: noMachine{},
			Inventory: func(context.Context) (*inventory.Inventory, error) {
				return &inventory.Inventory{Interfaces: []inventory.Interface{{Name: "eth9", MACAddress: mac}}}, nil
			},
			Ready: func(u string) { ready <- u },
		},
	})
	if err != nil {
		return err
	}
	agentErr := make(chan error, 1)
	go func() { agentErr <- a.Run(ctx) }()
	select {
	case b.agent = <-ready:
	case err := <-agentErr:
		return fmt.Errorf("agent: %w", err)
	case <-time.After(2 * time.Minute):
		return errors.New("the agent's API did not come up in 2 minutes")
	}
	for _, s := range scenarios(b) {
		b.run(ctx, s)
	}
	runMultipath(ctx, ctl, log)
	if err := loop.Detach(); err != nil {
		fmt.Println("faildisk: detach:", err)
	}
	return nil
}

// noMachine keeps the VM up: the scenarios never power off.
type noMachine struct{}

func (noMachine) PowerOff() error                { return errors.New("faildisk: no power off here") }
func (noMachine) Reboot() error                  { return errors.New("faildisk: no reboot here") }
func (noMachine) Sync() error                    { return nil }
func (noMachine) FlushBlockDevice(string) error  { return nil }
func (noMachine) StepClock(time.Duration) error  { return nil }
func (noMachine) WriteRTC(context.Context) error { return nil }

// Tables over the base disk, in sectors.
func linear() []devmapper.Target {
	return []devmapper.Target{devmapper.Linear(0, diskSectors, baseDisk, 0)}
}

// errorRange is the disk with n failing sectors from sector at.
func errorRange(at, n uint64) []devmapper.Target {
	var t []devmapper.Target
	if at > 0 {
		t = append(t, devmapper.Linear(0, at, baseDisk, 0))
	}
	t = append(t, dmtest.Error(at, n))
	if end := at + n; end < diskSectors {
		t = append(t, devmapper.Linear(end, diskSectors-end, baseDisk, end))
	}
	return t
}

func allError() []devmapper.Target { return []devmapper.Target{dmtest.Error(0, diskSectors)} }

func delayed(ms int) []devmapper.Target {
	return []devmapper.Target{dmtest.Delay(0, diskSectors, baseDisk, 0, ms)}
}

// scenario is one command against a disk table.
type scenario struct {
	name  string
	table []devmapper.Target
	// during runs while the command runs (the disk vanishing).
	during  func(ctx context.Context, b *bed) error
	command string
	params  map[string]any
	// want is the final status; wantErr the substrings of command_error.
	want    string
	wantErr []string
	// wantLog are substrings of the agent's log during the command.
	wantLog []string
	// check looks at the finished command (result, error, log).
	check   func(b *bed, res cmdResult, log string) error
	timeout time.Duration
}

// cmdResult is one command as the agent reports it.
type cmdResult = agentclient.Reply

func (b *bed) run(ctx context.Context, s scenario) {
	start := time.Now()
	detail, err := b.runOne(ctx, s)
	secs := time.Since(start).Seconds()
	// Whatever happened, the next scenario starts on a working disk.
	if lerr := b.dm.Load(ctx, linear()); lerr != nil {
		err = errors.Join(err, fmt.Errorf("restoring the linear table: %w", lerr))
	}
	if err != nil {
		fmt.Printf("faildisk: fail %s %.1f %s\n", s.name, secs, oneLine(err.Error()))
		return
	}
	fmt.Printf("faildisk: ok %s %.1f %s\n", s.name, secs, oneLine(detail))
}

func (b *bed) runOne(ctx context.Context, s scenario) (string, error) {
	if err := b.dm.Load(ctx, s.table); err != nil {
		return "", err
	}
	// A machine boots into the ramdisk with nothing cached: every read
	// the command makes reaches the disk, as it would there.
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o644); err != nil {
		return "", fmt.Errorf("dropping the page cache: %w", err)
	}
	logStart := b.log.len()
	start := time.Now()
	r, err := b.client().Post(ctx, s.command, s.params, false)
	if err != nil {
		return "", err
	}
	if r.HTTPStatus != http.StatusOK {
		return "", fmt.Errorf("POST %s: %d %s", s.command, r.HTTPStatus, r.Body)
	}
	_, name, _ := strings.Cut(s.command, ".") // the list names commands without their extension
	b.posted = append(b.posted, name)
	var duringErr chan error
	if s.during != nil {
		duringErr = make(chan error, 1)
		go func() { duringErr <- s.during(ctx, b) }()
	}
	timeout := s.timeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	res, err := b.waitLast(ctx, timeout)
	if err != nil {
		return "", err
	}
	end := time.Now()
	if duringErr != nil {
		if err := <-duringErr; err != nil {
			return "", fmt.Errorf("during the command: %w", err)
		}
	}
	log := b.log.since(logStart)
	var problems []string
	if res.Status != s.want {
		problems = append(problems, fmt.Sprintf("status %s, want %s (error %s, result %s)", res.Status, s.want, res.Error, res.Result))
	}
	msg := errorMessage(res.Error)
	for _, w := range s.wantErr {
		if w == anyOffset {
			if !offsetRE.MatchString(msg) {
				problems = append(problems, fmt.Sprintf("command_error %q names no byte offset", msg))
			}
			continue
		}
		if !strings.Contains(msg, w) {
			problems = append(problems, fmt.Sprintf("command_error %q lacks %q", msg, w))
		}
	}
	if s.want == "FAILED" && string(res.Result) != "null" && len(res.Result) > 0 {
		problems = append(problems, fmt.Sprintf("a failed command reports a result: %s", res.Result))
	}
	for _, w := range s.wantLog {
		if !strings.Contains(log, w) {
			problems = append(problems, fmt.Sprintf("the agent's log during the command lacks %q", w))
		}
	}
	if err := b.checkCommandList(ctx); err != nil {
		problems = append(problems, err.Error())
	}
	n, gap := heartbeatGap(b.ironic, start, end)
	if gap > maxHeartbeatGap {
		problems = append(problems, fmt.Sprintf("no heartbeat for %s while the command ran (%d heartbeats in %s)", gap.Round(time.Second), n, end.Sub(start).Round(time.Second)))
	}
	if s.check != nil {
		if err := s.check(b, res, log); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return "", errors.New(strings.Join(problems, "; "))
	}
	detail := fmt.Sprintf("%s in %.1fs, %d heartbeats (longest gap %s)", res.Status, end.Sub(start).Seconds(), n, gap.Round(100*time.Millisecond))
	if msg != "" {
		detail += ": " + msg
	}
	return detail, nil
}

// errorMessage is command_error's message (IPA's error object), or its
// text when it is something else.
func errorMessage(raw json.RawMessage) string {
	var e struct {
		Message string `json:"message"`
		Details string `json:"details"`
	}
	if json.Unmarshal(raw, &e) == nil && (e.Message != "" || e.Details != "") {
		return e.Message + " | " + e.Details
	}
	if string(raw) == "null" {
		return ""
	}
	return string(raw)
}

// client is the agent's API with the scenarios' token.
func (b *bed) client() *agentclient.Client { return &agentclient.Client{Base: b.agent, Token: token} }

func (b *bed) commands(ctx context.Context) ([]cmdResult, error) {
	// The list as Ironic 21.4 polls it: without the token.
	code, cmds, err := (&agentclient.Client{Base: b.agent}).List(ctx)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/commands: HTTP %d", code)
	}
	return cmds, nil
}

// waitLast polls the command list until its last command ends.
func (b *bed) waitLast(ctx context.Context, timeout time.Duration) (cmdResult, error) {
	deadline := time.Now().Add(timeout)
	for {
		cmds, err := b.commands(ctx)
		if err != nil {
			return cmdResult{}, err
		}
		if len(cmds) == len(b.posted) && cmds[len(cmds)-1].Status != "RUNNING" {
			return cmds[len(cmds)-1], nil
		}
		if time.Now().After(deadline) {
			return cmdResult{}, fmt.Errorf("the command still runs after %s (command list %d entries, %d posted)", timeout, len(cmds), len(b.posted))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkCommandList: one entry per posted command, in order, every one
// ended, the earlier ones as they ended.
func (b *bed) checkCommandList(ctx context.Context) error {
	cmds, err := b.commands(ctx)
	if err != nil {
		return err
	}
	if len(cmds) != len(b.posted) {
		return fmt.Errorf("command list has %d entries, %d commands were posted", len(cmds), len(b.posted))
	}
	for i, c := range cmds {
		if c.Name != b.posted[i] {
			return fmt.Errorf("command list entry %d is %s, posted %s", i, c.Name, b.posted[i])
		}
		if c.Status != "SUCCEEDED" && c.Status != "FAILED" {
			return fmt.Errorf("command list entry %d (%s) is %s after it ended", i, c.Name, c.Status)
		}
		if prev, ok := b.results[c.ID]; ok && prev != c.Status {
			return fmt.Errorf("command %s (%s) changed from %s to %s", c.ID, c.Name, prev, c.Status)
		}
		if (c.Status == "FAILED") != (string(c.Error) != "null") {
			return fmt.Errorf("command %s (%s) is %s with command_error %s", c.ID, c.Name, c.Status, c.Error)
		}
		b.results[c.ID] = c.Status
	}
	return nil
}

func (b *bed) imageInfo(id, file, format string, extra map[string]any) map[string]any {
	data, err := os.ReadFile(imageDir + "/" + file)
	sum := sha256.Sum256(data)
	if err != nil {
		fmt.Println("faildisk:", err)
	}
	info := map[string]any{
		"id": id, "urls": []string{b.images + "/" + file}, "disk_format": format, "container_format": "bare",
		"stream_raw_images": true, "os_hash_algo": "sha256", "os_hash_value": hex.EncodeToString(sum[:]), "node_uuid": nodeUUID,
	}
	for k, v := range extra {
		info[k] = v
	}
	return info
}

func (b *bed) node(dii map[string]any) map[string]any {
	if dii == nil {
		dii = map[string]any{}
	}
	return map[string]any{"uuid": nodeUUID, "properties": map[string]any{"root_device": map[string]any{"name": b.loop}},
		"instance_info": map[string]any{}, "driver_internal_info": dii}
}

func (b *bed) writeImage(info map[string]any, configdrive any) map[string]any {
	return map[string]any{
		"step": map[string]any{"interface": "deploy", "step": "write_image", "args": map[string]any{"image_info": info, "configdrive": configdrive}},
		"node": b.node(nil), "ports": []any{}, "deploy_version": map[string]any{"generic_hardware_manager": agent.GenericManagerVersion},
	}
}

func (b *bed) cleanStep(step string, dii map[string]any) map[string]any {
	return map[string]any{
		"step": map[string]any{"interface": "deploy", "step": step, "args": map[string]any{}},
		"node": b.node(dii), "ports": []any{}, "clean_version": map[string]any{"generic_hardware_manager": agent.GenericManagerVersion},
	}
}

// The failing range: 8 sectors at 8 MiB, inside every image's data.
const (
	badSector = 8 << 20 / 512
	badOffset = "8388608"
	eio       = "input/output error"
)

// notWritten: a failed write must not be reported as written, in its
// result or the agent's log.
func notWritten(_ *bed, res cmdResult, log string) error {
	if strings.Contains(string(res.Result), "written to device") || strings.Contains(log, "written to device") {
		return fmt.Errorf("a failed write is reported written: result %s", res.Result)
	}
	return nil
}

// progressLines wants at least n log lines holding msg while the command
// ran.
func progressLines(msg string, n int) func(b *bed, res cmdResult, log string) error {
	return func(_ *bed, _ cmdResult, log string) error {
		if got := strings.Count(log, msg); got < n {
			return fmt.Errorf("%d log lines %s while the command ran, want %d or more", got, msg, n)
		}
		return nil
	}
}

// anyOffset in wantErr asks for some byte offset in the message: "offset
// N", "byte N" or a range "bytes N-M".
const anyOffset = "<offset>"

var offsetRE = regexp.MustCompile(`(offset|byte|bytes) [0-9]+`)

// notErased: a failed erase must not log the failing device (the disk
// itself; its partitions may have been wiped) as erased.
func notErased(b *bed, _ cmdResult, log string) error {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "device erase finished") && strings.Contains(l, "device="+b.loop+" ") {
			return fmt.Errorf("the log says the failed erase of %s finished: %s", b.loop, l)
		}
	}
	return nil
}

// vanishOnWrite turns the whole disk to error as soon as the first
// write reaches the dm device (a write in flight, or one done): the disk
// goes away under a running write. The slow table it starts on keeps the
// first writes in flight long enough; the suspend sends those to the old
// table, and every write after meets the error table.
func vanishOnWrite(ctx context.Context, b *bed) error {
	return onFirstWrite(ctx, b, func() error { return b.dm.Load(ctx, allError()) })
}

// stallOnWrite stops the disk answering (the dm device suspended, its I/O
// held) for d from the first write, then lets it go on: the command must
// log progress through the stall, heartbeats must go on, and the command
// must then succeed.
func stallOnWrite(d time.Duration) func(ctx context.Context, b *bed) error {
	return func(ctx context.Context, b *bed) error {
		return onFirstWrite(ctx, b, func() error {
			if err := b.dm.Suspend(); err != nil {
				return err
			}
			// A command stuck on a disk keeps the agent busy: another
			// one is refused (IPA's AgentIsBusy, 409), not started.
			busyErr := b.wantBusy(ctx)
			time.Sleep(d)
			return errors.Join(busyErr, b.dm.Resume())
		})
	}
}

// wantBusy posts a command while one runs: it must be refused with 409.
func (b *bed) wantBusy(ctx context.Context) error {
	params := map[string]any{"node": map[string]any{"uuid": nodeUUID}, "ports": []any{}}
	r, err := b.client().Post(ctx, "deploy.get_deploy_steps", params, false)
	if err != nil {
		return err
	}
	if r.HTTPStatus != http.StatusConflict {
		return fmt.Errorf("a command posted while another ran on a stuck disk: %d %s, want 409", r.HTTPStatus, r.Body)
	}
	return nil
}

// onFirstWrite runs act as soon as the first write reaches the dm device
// (a write in flight, or one done).
func onFirstWrite(ctx context.Context, b *bed, act func() error) error {
	sys := "/sys/block/" + strings.TrimPrefix(b.dm.Path, "/dev/")
	field := func(file string, i int) (int64, error) {
		data, err := os.ReadFile(sys + "/" + file)
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(data))
		if len(f) <= i {
			return 0, fmt.Errorf("%s/%s: %q", sys, file, data)
		}
		return strconv.ParseInt(f[i], 10, 64)
	}
	written, err := field("stat", 6)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		inflight, err := field("inflight", 1)
		if err != nil {
			return err
		}
		now, err := field("stat", 6)
		if err != nil {
			return err
		}
		if inflight > 0 || now > written {
			return act()
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("no write reached the dm device in a minute")
}

func scenarios(b *bed) []scenario {
	exec := "deploy.execute_deploy_step"
	clean := "clean.execute_clean_step"
	eraseOpts := map[string]any{"agent_erase_devices_iterations": 1, "agent_erase_devices_zeroize": false}
	partInfo := map[string]any{
		"image_type": "partition", "root_mb": 16, "swap_mb": 0, "ephemeral_mb": 0, "preserve_ephemeral": false,
		"deploy_boot_mode": "bios", "boot_option": "local",
	}
	return []scenario{
		{name: "write_image_raw_error_range", table: errorRange(badSector, 8), command: exec,
			params: b.writeImage(b.imageInfo("raw-1", "disk.raw", "raw", nil), nil),
			want:   "FAILED", wantErr: []string{b.loop, "offset " + badOffset, eio}, check: notWritten},
		{name: "write_image_qcow2_error_range", table: errorRange(badSector, 8), command: exec,
			params: b.writeImage(b.imageInfo("qcow2-1", "disk.qcow2", "qcow2", nil), nil),
			want:   "FAILED", wantErr: []string{b.loop, "offset " + badOffset, eio}, check: notWritten},
		{name: "write_image_disk_vanishes", table: delayed(300), command: exec,
			params: b.writeImage(b.imageInfo("raw-2", "big.raw", "raw", nil), nil),
			during: vanishOnWrite,
			want:   "FAILED", wantErr: []string{b.loop, anyOffset, eio, "Writing image to device"}, check: notWritten},
		{name: "write_image_slow_disk", table: delayed(4000), command: exec,
			params: b.writeImage(b.imageInfo("raw-3", "disk.raw", "raw", nil), nil),
			// One line at the end; more say the write was seen running.
			want: "SUCCEEDED", timeout: 5 * time.Minute, check: progressLines(logtext.Msg(agent.EventWritingImage), 2)},
		{name: "write_image_stuck_disk", table: linear(), command: exec, during: stallOnWrite(25 * time.Second),
			params: b.writeImage(b.imageInfo("raw-6", "disk.raw", "raw", nil), nil),
			want:   "SUCCEEDED", check: progressLines(logtext.Msg(agent.EventWritingImage), 3)},
		{name: "erase_devices_metadata_error_at_start", table: errorRange(0, 8), command: clean,
			params: b.cleanStep("erase_devices_metadata", nil),
			want:   "FAILED", wantErr: []string{b.loop, anyOffset, eio}, check: notErased},
		{name: "erase_devices_metadata_error_at_end", table: errorRange(diskSectors-8, 8), command: clean,
			params: b.cleanStep("erase_devices_metadata", nil),
			want:   "FAILED", wantErr: []string{b.loop, anyOffset, eio}, check: notErased},
		// Unreadable sectors where the RAID probe reads (64 KiB in): the
		// disk is no RAID member and must not be skipped as one.
		{name: "erase_devices_metadata_unreadable_probe", table: errorRange(128, 8), command: clean,
			params: b.cleanStep("erase_devices_metadata", nil),
			want:   "FAILED", wantErr: []string{b.loop, anyOffset, eio}, check: notErased},
		{name: "erase_devices_unreadable_probe", table: errorRange(128, 8), command: clean,
			params: b.cleanStep("erase_devices", eraseOpts),
			want:   "FAILED", wantErr: []string{b.loop, "byte 0", eio}, check: notErased},
		{name: "erase_devices_error_range", table: errorRange(badSector, 8), command: clean,
			params: b.cleanStep("erase_devices", eraseOpts),
			want:   "FAILED", wantErr: []string{b.loop, "byte " + badOffset, eio}, check: notErased},
		{name: "erase_devices_disk_vanishes", table: delayed(300), command: clean,
			params: b.cleanStep("erase_devices", eraseOpts), during: vanishOnWrite,
			want: "FAILED", wantErr: []string{b.loop, anyOffset, eio}, check: notErased},
		// dm-flakey: the disk answers for a second after the table is
		// loaded, then fails every I/O for a minute (a disk dropping off
		// its bus); wherever the step is by then, it fails saying where.
		{name: "erase_devices_flakey_disk", table: []devmapper.Target{dmtest.Flakey(0, diskSectors, baseDisk, 0, 1, 60)}, command: clean,
			params: b.cleanStep("erase_devices", map[string]any{"agent_erase_devices_iterations": 2, "agent_erase_devices_zeroize": true}),
			want:   "FAILED", wantErr: []string{b.loop, anyOffset, eio}, check: notErased},
		{name: "erase_devices_express_error_at_end", table: errorRange(diskSectors-8, 8), command: clean,
			params: b.cleanStep("erase_devices_express", nil),
			want:   "FAILED", wantErr: []string{b.loop, anyOffset, eio}, check: notErased},
		{name: "erase_devices_slow_disk", command: clean, timeout: 5 * time.Minute,
			// The first 16 MiB answer each I/O after 1.5 s: about 30 s.
			table: []devmapper.Target{dmtest.Delay(0, 16<<20/512, baseDisk, 0, 1500),
				devmapper.Linear(16<<20/512, diskSectors-16<<20/512, baseDisk, 16<<20/512)},
			params: b.cleanStep("erase_devices", eraseOpts),
			want:   "SUCCEEDED", wantLog: []string{logtext.Msg(agent.EventEraseProgress)}},
		{name: "erase_devices_stuck_disk", table: linear(), command: clean, during: stallOnWrite(25 * time.Second),
			params: b.cleanStep("erase_devices", eraseOpts),
			want:   "SUCCEEDED", check: progressLines(logtext.Msg(agent.EventEraseProgress), 2)},
		{name: "configdrive_error_in_partition", table: errorRange(cdStart, 8), command: exec,
			params: b.writeImage(b.imageInfo("raw-4", "disk.raw", "raw", nil), b.images+"/configdrive.iso"),
			want:   "FAILED", wantErr: []string{b.loop, anyOffset, eio}},
		{name: "partition_table_error_at_start", table: errorRange(0, 8), command: exec,
			params: b.writeImage(b.imageInfo("part-1", "part.img", "raw", partInfo), nil),
			want:   "FAILED", wantErr: []string{b.loop, anyOffset, eio}, check: notWritten},
		{name: "partition_image_error_in_root", table: errorRange(4<<20/512, 8), command: exec,
			params: b.writeImage(b.imageInfo("part-2", "part.img", "raw", partInfo), nil),
			want:   "FAILED", wantErr: []string{b.loop, anyOffset, eio}, check: notWritten},
		{name: "write_image_after_failures", table: linear(), command: exec,
			params: b.writeImage(b.imageInfo("raw-5", "disk.raw", "raw", nil), nil),
			want:   "SUCCEEDED", check: func(b *bed, res cmdResult, _ string) error {
				if !strings.Contains(string(res.Result), "written to device "+b.loop) {
					return fmt.Errorf("result %s", res.Result)
				}
				return nil
			}},
	}
}
