package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/inventory"
)

func TestGenericEraseStepsListed(t *testing.T) {
	g := &GenericManager{}
	steps, err := g.CleanSteps(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"erase_devices": 10, "erase_devices_metadata": 99, "erase_devices_express": 0, "erase_pstore": 0}
	for _, s := range steps {
		if p, ok := want[s.Step]; ok {
			if s.Priority != p || s.Interface != "deploy" || s.RebootRequested || s.Abortable == nil || !*s.Abortable {
				t.Errorf("step %+v", s)
			}
			delete(want, s.Step)
		}
	}
	if len(want) != 0 {
		t.Errorf("clean steps missing: %v", want)
	}
	ds, _ := g.DeploySteps(context.Background(), nil, nil)
	found := false
	for _, s := range ds {
		if s.Step == "erase_devices_metadata" && s.Priority == 0 && s.Abortable == nil {
			found = true
		}
	}
	if !found {
		t.Errorf("deploy step erase_devices_metadata missing: %+v", ds)
	}
}

func TestGenericEraseStepsOnLoop(t *testing.T) {
	dev := looptest.Attach(t, 16<<20)
	other := looptest.Attach(t, 16<<20)
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte{0xEE}, 1<<20)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	disks := []inventory.Disk{{Name: dev, Size: 16 << 20}}
	g := &GenericManager{
		AllowedDevices: []string{dev},
		Disks:          func(context.Context) ([]inventory.Disk, error) { return disks, nil },
	}
	node := map[string]any{"uuid": "n1", "driver_internal_info": map[string]any{
		"agent_erase_devices_iterations": float64(1), "agent_erase_devices_zeroize": true}}
	res, err := g.ExecuteStep(context.Background(), "erase_devices_metadata", hwmgr.Request{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `"`+dev+`":{"method":"metadata wipe"`) {
		t.Errorf("erase_devices_metadata result %s", b)
	}
	res, err = g.ExecuteStep(context.Background(), "erase_devices", hwmgr.Request{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	r := res.(map[string]erase.DeviceResult)[dev]
	if r.Method != erase.MethodOverwrite || r.Bytes != 2*16<<20 {
		t.Errorf("erase_devices result %+v", r)
	}
	// A disk outside allowed_devices is refused before anything is erased.
	disks = []inventory.Disk{{Name: other}}
	if _, err := g.ExecuteStep(context.Background(), "erase_devices", hwmgr.Request{Node: node}); err == nil || !strings.Contains(err.Error(), "not in the allowed devices") {
		t.Errorf("unallowed disk: %v", err)
	}
}

// After a whole-disk image, get_partition_uuids answers the disk's MBR
// signature as IPA does.
func TestFinishWholeDiskImageRecordsPartitionUUIDs(t *testing.T) {
	dev := looptest.Attach(t, 16<<20)
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	mbr := make([]byte, 512)
	copy(mbr[440:], []byte{0x78, 0x56, 0x34, 0x12})
	mbr[510], mbr[511] = 0x55, 0xAA
	if _, err := f.WriteAt(mbr, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Without an agent (the table's unit tests) the UUIDs are returned.
	g := &GenericManager{AllowedDevices: []string{dev}}
	uuids, err := g.finishWholeDiskImage(context.Background(), dev, "")
	if err != nil || uuids["root uuid"] != "0x12345678" {
		t.Fatalf("uuids %v %v", uuids, err)
	}
	// With an agent they are recorded for standby.get_partition_uuids.
	a := &Agent{cfg: &config.Config{}}
	g.agent = a
	if _, err := g.finishWholeDiskImage(context.Background(), dev, ""); err != nil {
		t.Fatal(err)
	}
	fn, err := a.bindGetPartitionUUIDs(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fn(context.Background())
	if err != nil || got.(map[string]any)["root uuid"] != "0x12345678" {
		t.Errorf("get_partition_uuids = %v, %v", got, err)
	}
}

// ipa-guard-special-filesystems reaches the erase steps: by default a
// device holding GFS2 is refused whatever the node says; with the agent's
// guard off (as IPA's CONF.guard_special_filesystems=False) it is wiped.
func TestGuardSpecialFilesystemsConfig(t *testing.T) {
	for _, guard := range []bool{true, false} {
		dev := looptest.Attach(t, 64<<20)
		looptest.WriteAt(t, dev, 65536, []byte{0x01, 0x16, 0x19, 0x70, 0, 0, 0, 1}) // GFS2 superblock magic
		flags := map[string]string{"allowed_devices": dev}
		if !guard {
			flags["guard_special_filesystems"] = "false"
		}
		ra := standalone(t, Options{Hooks: Hooks{Machine: &fakeMachine{}, ShutdownDelay: time.Millisecond}}, flags)
		_, err := ra.agent.generic.ExecuteStep(context.Background(), "erase_devices_metadata", hwmgr.Request{Node: map[string]any{"uuid": "n1"}})
		var pe *erase.ProtectedDeviceError
		switch {
		case guard && !errors.As(err, &pe):
			t.Errorf("guard on: %v, want a refusal naming GFS2", err)
		case !guard && err != nil:
			t.Errorf("guard off: %v", err)
		}
		magic := looptest.ReadAt(t, dev, 65536, 4)
		if wiped := bytes.Equal(magic, make([]byte, 4)); wiped == guard {
			t.Errorf("guard_special_filesystems=%v: GFS2 superblock wiped=%v", guard, wiped)
		}
	}
}
