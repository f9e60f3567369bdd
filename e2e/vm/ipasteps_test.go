package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/internal/testbed/ipa/ipadiff"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// sideStepsToken is the pre-shared agent token of the standalone agents of
// TestVMIPASteps (IPA's ipa-agent-token: at least 32 characters).
const sideStepsToken = "ipasteps0123456789abcdef0123456789abcdef"

// sideStepsNode is the node Ironic's agent client sends with
// get_*_steps (node.as_dict(secure=True), the fields the agents read).
func sideStepsNode() map[string]any {
	return map[string]any{
		"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c781", "name": "side-steps", "driver": "fake-hardware",
		"provision_state": "cleaning", "target_provision_state": "available",
		"properties":           map[string]any{"capabilities": "boot_mode:bios", "root_device": map[string]any{"serial": deployTarget}},
		"driver_info":          map[string]any{},
		"driver_internal_info": map[string]any{"agent_cached_clean_steps": nil},
		"instance_info":        map[string]any{}, "extra": map[string]any{},
		"raid_config": map[string]any{}, "target_raid_config": map[string]any{},
	}
}

// sideCall is one call of TestVMIPASteps: a command and its parameters,
// as Ironic's agent client sends it.
type sideCall struct {
	name   string
	params map[string]any
}

// sideStepsCalls are the calls compared: the three step listings Ironic
// asks for at every cleaning, deploy and servicing, the partition UUIDs it
// asks after a partition or whole-disk write, a write_image (prepare_image)
// that fails on a bad checksum, and commands neither agent has.
func sideStepsCalls(macs [2]string, imageURL string) []sideCall {
	ports := []any{
		map[string]any{"uuid": "7a1c8c34-5f2c-4c53-9f0e-2f0f0b6b1b01", "address": macs[0], "pxe_enabled": true, "local_link_connection": map[string]any{}},
		map[string]any{"uuid": "7a1c8c34-5f2c-4c53-9f0e-2f0f0b6b1b02", "address": macs[1], "pxe_enabled": false, "local_link_connection": map[string]any{}},
	}
	steps := func(name string) sideCall {
		return sideCall{name, map[string]any{"node": sideStepsNode(), "ports": ports}}
	}
	return []sideCall{
		steps("clean.get_clean_steps"),
		steps("deploy.get_deploy_steps"),
		steps("service.get_service_steps"),
		{"standby.get_partition_uuids", map[string]any{}},
		{"standby.prepare_image", map[string]any{"image_info": map[string]any{
			"id": "side-bad-checksum", "urls": []any{imageURL}, "disk_format": "raw", "container_format": "bare",
			"stream_raw_images": true, "os_hash_algo": "sha256", "os_hash_value": strings.Repeat("0", 64),
			"image_type": "whole-disk", "node_uuid": sideStepsNode()["uuid"],
		}, "configdrive": nil}},
		{"nosuch.get_clean_steps", map[string]any{}},
		{"standby.nosuch_command", map[string]any{}},
	}
}

// sideAnswer is one agent's reply to a call: the HTTP status and body.
// The body's "id" (a fresh UUID per command) is dropped.
type sideAnswer struct {
	Status int `json:"http_status"`
	Body   any `json:"body"`
}

// callAgent posts one command to the agent API at base, waiting for it
// as Ironic does for a synchronous command (?wait=true).
func callAgent(ctx context.Context, base, token string, c sideCall) (sideAnswer, error) {
	r, err := (&agentclient.Client{Base: base, Token: token}).Post(ctx, c.name, c.params, true)
	if err != nil {
		return sideAnswer{}, err
	}
	a := sideAnswer{Status: r.HTTPStatus}
	if err := json.Unmarshal(r.Body, &a.Body); err != nil {
		a.Body = string(r.Body)
	}
	if m, ok := a.Body.(map[string]any); ok {
		delete(m, "id")
	}
	return a, nil
}

// waitAgentAPI polls the agent's command list until it answers 200 (IPA
// serves its API only once its hardware managers are initialised).
func waitAgentAPI(ctx context.Context, vm *qemu.VM, base, token string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := &agentclient.Client{Base: base, Token: token}
	return c.WaitReady(ctx, 2*time.Second, func() bool { exited, _ := vm.Exited(); return exited })
}

// TestVMIPASteps boots IPA 13's ramdisk and ours, standalone with a
// pre-shared token, on the same SeaBIOS machine (the six disks, two NICs)
// and sends each, from the host through its API as Ironic's agent client
// does, the calls of sideStepsCalls: get_clean_steps, get_deploy_steps and
// get_service_steps (names, interfaces, priorities, argsinfo,
// reboot_requested, abortable, matched by step name), get_partition_uuids,
// a prepare_image whose checksum does not match, and two unknown commands.
// The replies are compared field by field; every difference must be in
// testdata/ipa13-steps-differences.json with its reason. The replies are
// left beside the VM logs (for testdata/ipa13-steps/, which
// TestIPA13RecordedStepsAllowed replays). IPA_SIDE_BY_SIDE=1 only.
func TestVMIPASteps(t *testing.T) {
	ipaRamdisk(t)
	allow, err := ipadiff.LoadAllowList("testdata/ipa13-steps-differences.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	macs := [2]string{"52:54:00:1c:00:01", "52:54:00:1c:00:02"}
	agentPort := newAgentPort(t)
	m := serviceMachine(t, ramdisk(t), "bios", agentPort, macs)
	m.MemoryMB = qemu.SideBySideMachine("bios").MemoryMB
	// A small whole-disk image whose checksum the call gets wrong.
	img := mbrImage()
	imgAddr := serve(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(img))
	}))
	m.GuestFwd[guestHost+":80"] = imgAddr
	calls := sideStepsCalls(macs, "http://"+guestHost+"/image.raw")
	base := "http://127.0.0.1:" + strconv.Itoa(agentPort)
	answers := map[string]any{}
	for _, a := range sideAgents(t, "bios", macs) {
		m.Kernel, m.Initrd = a.kernel, a.initrd
		m.Dir = filepath.Join(vmDir(t), a.name)
		m.Append = "ipa-standalone=1 ipa-agent-token=" + sideStepsToken + " " + a.extra
		start := time.Now()
		vm := boot(t, ctx, m, qemu.Options{})
		if err := waitAgentAPI(ctx, vm, base, sideStepsToken, 12*time.Minute); err != nil {
			t.Fatalf("%s: %v\n%s", a.name, err, consoleTail(vm, 40))
		}
		reportSeconds(t, time.Since(start), a.name, "agent_api_up_s")
		got := map[string]any{}
		for _, c := range calls {
			ans, err := callAgent(ctx, base, sideStepsToken, c)
			if err != nil {
				t.Fatalf("%s: %v", a.name, err)
			}
			got[c.name] = ans
		}
		vm.Kill()
		// Decoded again: the comparison walks plain JSON values.
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		answers[a.name] = doc
		p := filepath.Join(vmDir(t), a.name+"-steps.json")
		if err := os.WriteFile(p, []byte(shortJSONIndent(doc)+"\n"), 0o644); err == nil {
			t.Logf("%s's replies: %s", a.name, p)
		}
	}
	ipadiff.Check(t, "", answers["ipa"], answers["ours"], allow, true)
}

// TestIPA13RecordedStepsAllowed replays TestVMIPASteps's comparison on the
// replies its last run stored (testdata/ipa13-steps/<agent>.json, copied
// from the *-steps.json files the test leaves beside the VM logs): every
// difference is in the allow-list.
func TestIPA13RecordedStepsAllowed(t *testing.T) {
	allow, err := ipadiff.LoadAllowList("testdata/ipa13-steps-differences.json")
	if err != nil {
		t.Fatal(err)
	}
	allowed := ipadiff.Check(t, "", readRecorded(t, "testdata/ipa13-steps/ipa.json"), readRecorded(t, "testdata/ipa13-steps/ours.json"), allow, false)
	for _, a := range allow {
		if len(allowed[a.Path]) == 0 {
			t.Errorf("allow-list entry %q matches no difference in the recorded replies: remove it", a.Path)
		}
	}
}
