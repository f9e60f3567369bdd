package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/internal/testbed/agentclient"
	"github.com/ironic-go/ironic-agent/inventory"
)

// writeImageManager stands in for the image writer: it records the
// image_info it was given.
type writeImageManager struct {
	mu        sync.Mutex
	imageInfo map[string]any
}

func (m *writeImageManager) Name() string      { return "fake_image_manager" }
func (m *writeImageManager) ClassName() string { return "FakeImageManager" }
func (m *writeImageManager) Version() string   { return "1.0" }
func (m *writeImageManager) EvaluateHardwareSupport(context.Context) hwmgr.Support {
	return hwmgr.SupportMainline
}
func (m *writeImageManager) CleanSteps(context.Context, map[string]any, []any) ([]hwmgr.Step, error) {
	return nil, nil
}
func (m *writeImageManager) DeploySteps(context.Context, map[string]any, []any) ([]hwmgr.Step, error) {
	return []hwmgr.Step{{Step: "write_image", Priority: 0, Interface: "deploy"}}, nil
}
func (m *writeImageManager) ExecuteStep(_ context.Context, step string, req hwmgr.Request) (any, error) {
	if step != "write_image" {
		return nil, hwmgr.ErrNoSuchMethod
	}
	var info map[string]any
	if err := json.Unmarshal(req.Args["image_info"], &info); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.imageInfo = info
	m.mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	// IPA's write_image returns prepare_image's command_result.
	return map[string]string{"result": fmt.Sprintf("prepare_image: image (%s) written to device /dev/loop9 root_uuid=0x1234abcd", info["id"])}, nil
}

// ironicPost sends a command document the way Ironic 21.4's agent_client
// does.
func ironicPost(t *testing.T, ra *runningAgent, body string, wait bool) agentclient.Reply {
	t.Helper()
	r, err := ra.api().PostDocument(t.Context(), []byte(body), wait)
	if err != nil {
		t.Fatal(err)
	}
	if r.HTTPStatus != http.StatusOK || r.Status == "" {
		t.Fatalf("POST: %d %s", r.HTTPStatus, r.Body)
	}
	return *r
}

// pollLast waits, as the conductor does over heartbeats or its
// command_wait_interval polling, until the last command named name is done.
func pollLast(t *testing.T, ra *runningAgent, name string) agentclient.Reply {
	t.Helper()
	return pollLastFor(t, ra, name, 30*time.Second)
}

// pollLastFor is pollLast with its own deadline (GRUB installs are slow
// under -race on two cores).
func pollLastFor(t *testing.T, ra *runningAgent, name string, wait time.Duration) agentclient.Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	r, err := ra.api().WaitDone(ctx, name, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return *r
}

// TestIronic214DirectDeploySequence replays the agent side of a direct
// deploy of a whole-disk raw image as Ironic 21.4 drove it
// (deploy-raw capture): get_deploy_steps, write_image, get_partition_uuids,
// install_bootloader (polled), power_off.
func TestIronic214DirectDeploySequence(t *testing.T) {
	// The replayed ramdisk wrote no UEFI boot entries: startAgent gives
	// the agent no efivarfs.
	m := &fakeMachine{}
	img := &writeImageManager{}
	inv := func(ctx context.Context) (*inventory.Inventory, error) {
		i, err := testInventory(ctx)
		i.Boot.CurrentBootMode = "uefi"
		return i, err
	}
	ra := standalone(t, Options{Hooks: Hooks{Machine: m, ShutdownDelay: time.Millisecond, Inventory: inv},
		Managers: []func() hwmgr.Manager{func() hwmgr.Manager { return img }}}, nil)

	r := ironicPost(t, ra, string(readTestdata(t, "deploy.get_deploy_steps.request.json")), true)
	if r.Name != "get_deploy_steps" || r.Status != "SUCCEEDED" || !bytes.Contains(r.Result, []byte(`"FakeImageManager":[{"step":"write_image","priority":0,"interface":"deploy","reboot_requested":false}]`)) {
		t.Fatalf("get_deploy_steps %+v %s", r, r.Result)
	}
	var steps struct {
		Versions json.RawMessage `json:"hardware_manager_version"`
	}
	_ = json.Unmarshal(r.Result, &steps)
	if cmds := listCommands(t, ra); len(cmds) != 1 || cmds[0] != "get_deploy_steps:SUCCEEDED" {
		t.Fatalf("freshly booted list %+v", cmds)
	}

	// The recorded request, with deploy_version replaced by what this agent
	// reported (Ironic stores it from get_deploy_steps).
	var req map[string]any
	_ = json.Unmarshal(readTestdata(t, "deploy.execute_deploy_step.request.json"), &req)
	params := req["params"].(map[string]any)
	var versions any
	_ = json.Unmarshal(steps.Versions, &versions)
	params["deploy_version"] = versions
	body, _ := json.Marshal(req)
	r = ironicPost(t, ra, string(body), false)
	if r.Name != "execute_deploy_step" || r.Status == "" {
		t.Fatalf("execute_deploy_step %+v", r)
	}
	r = pollLast(t, ra, "execute_deploy_step")
	var res struct {
		Result map[string]string `json:"deploy_result"`
		Step   map[string]any    `json:"deploy_step"`
	}
	_ = json.Unmarshal(r.Result, &res)
	if r.Status != "SUCCEEDED" || res.Step["step"] != "write_image" || res.Step["interface"] != "deploy" ||
		res.Result["result"] != "prepare_image: image (disk.raw) written to device /dev/loop9 root_uuid=0x1234abcd" {
		t.Errorf("write_image result %+v %s", r, r.Result)
	}
	img.mu.Lock()
	if img.imageInfo["urls"].([]any)[0] != "http://127.0.0.1:8088/images/disk.raw" || img.imageInfo["stream_raw_images"] != true {
		t.Errorf("image_info %v", img.imageInfo)
	}
	img.mu.Unlock()

	r = ironicPost(t, ra, `{"name": "standby.get_partition_uuids", "params": {}}`, true)
	if r.Status != "SUCCEEDED" || string(r.Result) != "{}" {
		t.Errorf("get_partition_uuids %+v %s", r, r.Result)
	}
	r = ironicPost(t, ra, string(readTestdata(t, "image.install_bootloader.request.json")), false)
	if r.Name != "install_bootloader" {
		t.Errorf("install_bootloader %+v", r)
	}
	if r = pollLast(t, ra, "install_bootloader"); r.Status != "SUCCEEDED" {
		t.Errorf("install_bootloader (whole disk, no efibootmgr) %+v %s", r, r.Error)
	}
	r = ironicPost(t, ra, `{"name": "standby.power_off", "params": {}}`, false)
	if r.Name != "power_off" {
		t.Errorf("power_off %+v", r)
	}
	pollLast(t, ra, "power_off")
	if got := strings.Join(listCommands(t, ra), ","); got != "get_deploy_steps:SUCCEEDED,execute_deploy_step:SUCCEEDED,get_partition_uuids:SUCCEEDED,install_bootloader:SUCCEEDED,power_off:SUCCEEDED" {
		t.Errorf("command list %s", got)
	}
	m.mu.Lock()
	if strings.Join(m.actions, ",") != "rtc,poweroff" { // hwclock --systohc first, as IPA
		t.Errorf("machine %v", m.actions)
	}
	m.mu.Unlock()
}
