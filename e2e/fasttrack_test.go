package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/lifecycle"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
)

// flow is one node's way through inspection, cleaning and deploy on one
// Ironic, with the lifecycle driver, and what each phase took.
type flow struct {
	s      *suite
	ironic *ironic.Client
	// ironicURL and inspectionURL are what the agent is given, as the
	// kernel parameters of the boot would (ipa-api-url,
	// ipa-inspection-callback-url).
	ironicURL, inspectionURL string
	inspectInterface         string
	// fast: one agent for the whole flow (the driver's fast track); else
	// one agent per phase, as a boot per operation would start.
	fast   bool
	phases []string
	agents []*agentProc
	// tokenKept and urlKept: Ironic still held a token, and this agent
	// URL, once cleaning had ended.
	tokenKept bool
	urlKept   string
}

// run takes a node from enrolment to active and returns the total time.
func (l *flow) run(t *testing.T, name, mac, imageURL, imagePath string) time.Duration {
	t.Helper()
	ctx := t.Context()
	dev := deployDisk(t)
	md5sum, sha := fileSums(t, imagePath)
	start := time.Now()
	phase := time.Now()
	mark := func(what string) {
		l.phases = append(l.phases, fmt.Sprintf("%s %s", what, time.Since(phase).Round(time.Millisecond)))
		phase = time.Now()
	}
	n := ironic.Enroll(t, t.Context(), l.ironic, ironic.NodeSpec{Name: name,
		InspectInterface: l.inspectInterface,
		Properties:       map[string]any{"cpus": nil, "memory_mb": nil, "local_gb": nil, "cpu_arch": nil},
		InstanceInfo: map[string]any{
			"image_source":        imageURL,
			"image_checksum":      md5sum,
			"image_os_hash_algo":  "sha256",
			"image_os_hash_value": sha,
			"image_disk_format":   "raw",
			"root_gb":             1,
		},
	}, mac)
	mark("enrol")
	d := l.s.driver(t, l.ironic, n.UUID, agentOpts{MAC: mac, Devices: []string{dev}, APIURL: l.ironicURL, InspectionURL: l.inspectionURL})
	d.FastTrack = l.fast
	step := func(target nodes.TargetProvisionState) {
		t.Helper()
		a, _ := d.Start(nodes.ProvisionStateOpts{Target: target})
		if dead, err := a.Exited(); dead {
			t.Fatalf("the agent ended (%v) before %s", err, target)
		}
		_, done, _ := lifecycle.States(target)
		d.Wait(done, stepTimeout)
		l.agents = d.Boots()
		mark(string(target))
	}
	step(nodes.TargetInspect)
	if l.fast {
		// Ironic fast-tracks cleaning only for an agent whose heartbeat
		// it recorded (agent_last_heartbeat), and it ignores one that
		// comes in "inspect wait" (Ironic 2023.1). A provide before the next heartbeat
		// would have it power-cycle the node and wipe the token: a
		// machine boots the agent again, this one process cannot.
		if _, err := l.ironic.WaitFor(ctx, n.UUID, 2*time.Minute, "a heartbeat Ironic recorded (agent_last_heartbeat)", func(n *nodes.Node) bool {
			_, ok := n.DriverInternalInfo["agent_last_heartbeat"]
			return ok
		}); err != nil {
			t.Fatal(err)
		}
		mark("heartbeat recorded")
	}
	// The hint names the loop device only now: the inspected inventory
	// (the fixture machine's disks) does not hold it. The boot-mode hook
	// (2025.1 on) stored the fixture's BIOS boot mode; UEFI again, with
	// vendor lenovo, keeps Ironic from setting the disk boot device at the
	// end of the deploy, which fake management refuses (see CreateNode).
	if _, err := nodes.Update(ctx, l.ironic.Service, n.UUID, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"name": dev}},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/capabilities", Value: "boot_mode:uefi"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/vendor", Value: "lenovo"},
	}).Extract(); err != nil {
		t.Fatal(err)
	}
	step(nodes.TargetProvide)
	// Ironic wipes the token and agent URL after cleaning only when the
	// node cannot fast-track (wipe_cleaning_internal_info); the API shows
	// a stored token masked.
	got, err := l.ironic.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	_, l.tokenKept = got.DriverInternalInfo["agent_secret_token"]
	l.urlKept, _ = got.DriverInternalInfo["agent_url"].(string)
	step(nodes.TargetActive)
	assertDiskHolds(t, dev, imagePath)
	return time.Since(start)
}

// TestFastTrack: with [deploy]fast_track = true (Metal3's default) one
// agent process, started once with the API and inspection callback URLs
// as Ironic's fast-track kernel parameters give them, lives through
// inspection -> manageable -> cleaning -> available -> deploy -> active:
// Ironic reboots nothing, the agent looks up once and keeps its token
// (Ironic wipes token and URL between operations only when the node
// cannot fast-track). The same flow on the suite's Ironic (fast_track
// off, an agent boot per operation) is the time it is measured against.
func TestFastTrack(t *testing.T) {
	s := need(t)
	imgDir := t.TempDir()
	raw, _ := deployImages(t, imgDir)
	srv := httptest.NewServer(http.FileServer(http.Dir(imgDir)))
	t.Cleanup(srv.Close)
	imageURL := srv.URL + "/" + filepath.Base(raw)

	ft := ironic.StartForTest(t, t.Context(), s.config(ironic.Config{FastTrack: true}))
	fast := &flow{s: s, ironic: ft.Ironic, ironicURL: ft.IronicURL, fast: true}
	slow := &flow{s: s, ironic: s.ironic, ironicURL: s.services.IronicURL}
	if s.series.HasInspector() {
		fast.inspectInterface, fast.inspectionURL = "inspector", ft.InspectorURL+"/v1/continue"
		slow.inspectInterface, slow.inspectionURL = "inspector", s.services.InspectorURL+"/v1/continue"
	} else {
		fast.inspectInterface, fast.inspectionURL = "agent", ft.IronicURL+"/v1/continue_inspection"
		slow.inspectInterface, slow.inspectionURL = "agent", s.services.IronicURL+"/v1/continue_inspection"
	}

	fastTime := fast.run(t, "e2e-fast-track", "52:54:e2:f7:00:01", imageURL, raw)
	if t.Failed() {
		return
	}
	a := fast.agents[0]
	pid := a.cmd.Process.Pid
	if len(fast.agents) != 1 {
		t.Errorf("fast track started %d agents, want 1", len(fast.agents))
	}
	log := a.Log()
	// One lookup, one token for the whole flow: Ironic keeps the token of
	// a fast-trackable node across operations.
	if got := strings.Count(log, logtext.Msg(agent.EventLookupSucceeded)); got != 1 {
		t.Errorf("agent (pid %d) looked up %d times, want once", pid, got)
	}
	if got := strings.Count(log, logtext.Msg(agent.EventTokenReceived)); got != 1 {
		t.Errorf("agent (pid %d) received %d tokens, want one", pid, got)
	}
	if strings.Contains(log, logtext.Msg(agent.EventHeartbeatFailed)) {
		t.Errorf("a heartbeat of the fast-track agent failed")
	}
	for _, kind := range []string{"clean", "deploy"} {
		if !strings.Contains(log, logtext.Msg(agent.EventStepCompleted)+` kind=`+kind) {
			t.Errorf("agent log shows no completed %s step: the agent started for inspection did not serve it", kind)
		}
	}

	// http or https, as the series' require_tls has it.
	if want := fmt.Sprintf("://127.0.0.1:%d", a.port); !fast.tokenKept || !strings.HasSuffix(fast.urlKept, want) {
		t.Errorf("after fast-track cleaning Ironic holds token %v, agent_url %q; want the token and the agent's URL (...%s) kept", fast.tokenKept, fast.urlKept, want)
	}
	slowTime := slow.run(t, "e2e-no-fast-track", "52:54:e2:f7:00:02", imageURL, raw)
	if slow.tokenKept || slow.urlKept != "" {
		t.Errorf("after cleaning without fast track Ironic holds token %v, agent_url %q; want both wiped", slow.tokenKept, slow.urlKept)
	}
	if len(slow.agents) != 3 {
		t.Errorf("without fast track %d agents ran, want 3 (one per operation)", len(slow.agents))
	}
	t.Logf("fast track (one agent, pid %d): %s from enrolment to active (%s)", pid, fastTime.Round(time.Millisecond), strings.Join(fast.phases, ", "))
	t.Logf("without fast track (%d agents): %s (%s)", len(slow.agents), slowTime.Round(time.Millisecond), strings.Join(slow.phases, ", "))
}
