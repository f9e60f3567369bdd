package vm

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	agentironic "github.com/ironic-go/ironic-agent/agent/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// Ports of TestVMFastTrack, moved by $E2E_PORT_OFFSET: the API of its own
// Ironic with fast track on, and the hostfwd to its VM's agent.
var (
	fastTrackIronicPort = portOffset() + 9551
	fastTrackAgentPort  = portOffset() + 9552
)

// inspectCleanDeploy takes a node named name, enrolled on Ironic c
// (its API on port at guestHost), through agent inspection, automated
// cleaning (erase_devices_metadata on its six disks) and a whole-disk
// deploy in a SeaBIOS VM, booting the ramdisk for each step or, with fast
// track, once. It returns the lifecycle, each step's time and the time
// from the inspect request to active.
func inspectCleanDeploy(t *testing.T, ctx context.Context, rd *qemu.Ramdisk, c *ironic.Client, port int, fast bool, macs [2]string, name string, agentPort int) (*lifecycle, []string, time.Duration) {
	t.Helper()
	m := serviceMachine(t, rd, "bios", agentPort, macs)
	m.Dir = filepath.Join(vmDir(t), name)
	m.GuestFwd = map[string]string{guestHost + ":" + strconv.Itoa(port): "127.0.0.1:" + strconv.Itoa(port)}
	img := mbrImage()
	imgAddr := serve(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(img))
	}))
	m.GuestFwd[guestHost+":80"] = imgAddr
	api := "http://" + guestHost + ":" + strconv.Itoa(port)
	// What Ironic 35 passes: an inspection boot gets only the callback,
	// unless fast track is on, when it also gets the API URL
	// (prepare_managed_inspection); a cleaning or deploy boot gets the API.
	inspectArgs := "ipa-inspection-callback-url=" + api + "/v1/continue_inspection"
	agentArgs := strings.Join([]string{"ipa-api-url=" + api, "ipa-advertise-host=127.0.0.1",
		"ipa-advertise-port=" + strconv.Itoa(agentPort), "ipa-lookup-timeout=900", "ironic_agent.dhcp=" + macs[0]}, " ")
	if fast {
		inspectArgs += " " + agentArgs
	} else {
		inspectArgs += " ironic_agent.dhcp=" + macs[0]
	}

	node := ironic.Enroll(t, ctx, c, ironic.NodeSpec{Name: name, InspectInterface: "agent",
		Properties: map[string]any{"capabilities": "boot_mode:bios"}}, macs[:]...)
	l := kernelLifecycle(t, ctx, c, node.UUID, m)
	l.fastTrack = fast
	var phases []string
	start := time.Now()
	l.machine.Append = inspectArgs
	phases = append(phases, fmt.Sprintf("inspect %.1fs", l.Inspect(6*time.Minute).Took.Seconds()))
	if err := nodes.Update(ctx, c.Service, node.UUID, append(imageInfo("http://"+imgAddr+"/image.raw", img),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"serial": deployTarget}},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/image_http_proxy", Value: "http://" + guestHost + ":80"},
		// At the end of a BIOS deploy Ironic sets the boot device to
		// disk, which the fake management interface refuses.
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/management_interface", Value: "noop"},
	)).Err; err != nil {
		t.Fatal(err)
	}
	l.machine.Append = agentArgs
	phases = append(phases, fmt.Sprintf("provide %.1fs", l.Provide(6*time.Minute).Took.Seconds()))
	phases = append(phases, fmt.Sprintf("active %.1fs", l.Deploy(6*time.Minute).Took.Seconds()))
	total := time.Since(start)
	// Ironic ends the deploy by having the agent power the VM off.
	boots := l.Boots()
	if err := boots[len(boots)-1].Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readAt(t, m.DiskPath(deployTargetID(t, m)), 0, len(img)); !bytes.Equal(got, img) {
		t.Errorf("%s: the disk does not hold the image", name)
	}
	return l, phases, total
}

// TestVMFastTrack measures fast track ([deploy]fast_track, Metal3's
// default) where it counts, with machines that boot: one VM goes from
// inspection through automated cleaning to a deployed disk on an Ironic
// 2026.1 of the test's own with fast track on, booting the ramdisk once;
// the same flow on the suite's Ironic (fast track off) boots it for each
// operation. The fast-track agent looks up right after its inspection
// data is accepted and, like IPA 13, meets a 409 while Ironic's hooks
// hold the node's lock; the test reports what that costs. At load 15:
// 53.5 s from the inspect request to active with fast track (inspect 35.4 s
// of which the boot is most, provide 10.3 s of which 6.4 s the lookup's
// 409 pause, deploy 7.7 s) against 105.1 s with three boots; 195 s in all.
// With -race at load 10: 44.4 s against 79.7 s, 148 s in all.
func TestVMFastTrack(t *testing.T) {
	rd := ramdisk(t)
	s := services(t)
	if s.series.HasInspector() {
		t.Skipf("SKIPPED: the fast-track VM flow uses Ironic's built-in inspection; series %s runs ironic-inspector", s.series)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	ft := ironic.StartForTest(t, ctx, ironic.Config{Dir: filepath.Join(theSuite.dir, "fast-track-ironic"), Series: s.series,
		IronicPort: fastTrackIronicPort, FastTrack: true})
	c := ft.Ironic

	fast, fastPhases, fastTime := inspectCleanDeploy(t, ctx, rd, c, fastTrackIronicPort, true, newMACs(t), "vm-fast-track", fastTrackAgentPort)
	if t.Failed() {
		return
	}
	vm := fast.Boots()[0]
	count := func(what string) int {
		n := 0
		for _, l := range vm.Lines() {
			if strings.Contains(l.Text, what) {
				n++
			}
		}
		return n
	}
	if len(fast.Boots()) != 1 || count("agent started") != 1 || count("lookup succeeded") != 1 {
		t.Errorf("fast track: %d boots, %d agent starts, %d lookups; want one of each", len(fast.Boots()), count("agent started"), count("lookup succeeded"))
	}
	conflict := "none"
	if l, ok := vm.Find(logtext.Msg(agentironic.EventLookupRetrying)); ok {
		if done, found := vm.Find(logtext.Msg(agent.EventLookupSucceeded)); found {
			conflict = fmt.Sprintf("%.1fs from the failed lookup to the one that succeeded (%s)", (done.At - l.At).Seconds(), lineError(l.Text))
		}
	}

	slow, slowPhases, slowTime := inspectCleanDeploy(t, ctx, rd, s.ironic, ironicPort, false, newMACs(t), "vm-no-fast-track", fastTrackAgentPort)
	t.Logf("fast track (one boot): %s; lookup conflict: %s", strings.Join(fastPhases, ", "), conflict)
	t.Logf("without fast track (%d boots): %s", len(slow.Boots()), strings.Join(slowPhases, ", "))
	reportSeconds(t, fastTime, "inspect_to_active_s")
	reportSeconds(t, slowTime, "inspect_to_active_without_fast_track_s")
}

// lineError is the error= field of a log line, for the report.
func lineError(text string) string {
	if _, e, ok := strings.Cut(text, "error="); ok {
		return "error=" + e
	}
	return text
}
