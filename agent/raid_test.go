package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/deploy/raid"
	"github.com/ironic-go/ironic-agent/inventory"
)

// The raid steps are listed as IPA lists them now that they run.
func TestRAIDStepsListed(t *testing.T) {
	g := &GenericManager{}
	clean, _ := g.CleanSteps(context.Background(), nil, nil)
	deploy, _ := g.DeploySteps(context.Background(), nil, nil)
	find := func(steps []hwmgr.Step, name string) *hwmgr.Step {
		for i := range steps {
			if steps[i].Step == name {
				return &steps[i]
			}
		}
		return nil
	}
	for _, name := range []string{"delete_configuration", "create_configuration"} {
		s := find(clean, name)
		if s == nil || s.Interface != "raid" || s.Priority != 0 || s.Abortable == nil || !*s.Abortable {
			t.Errorf("clean step %s: %+v", name, s)
		}
	}
	if s := find(deploy, "apply_configuration"); s == nil || s.Interface != "raid" || len(s.Argsinfo) != 2 {
		t.Errorf("deploy step apply_configuration: %+v", s)
	}
}

// apply_configuration's arguments are checked before any disk is looked
// at.
func TestRAIDApplyArguments(t *testing.T) {
	g := &GenericManager{Disks: func(context.Context) ([]inventory.Disk, error) {
		t.Fatal("disks listed for bad arguments")
		return nil, nil
	}}
	for _, c := range []struct {
		args map[string]string
		want string
	}{
		{map[string]string{}, "apply_configuration needs raid_config"},
		{map[string]string{"raid_config": `[1]`}, "must be an object"},
		{map[string]string{"raid_config": `{}`, "delete_existing": `"perhaps"`}, "delete_existing"},
	} {
		req := hwmgr.Request{Node: map[string]any{}, Args: map[string]json.RawMessage{}}
		for k, v := range c.args {
			req.Args[k] = json.RawMessage(v)
		}
		if _, err := g.raidApplyStep(context.Background(), req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("apply(%v) = %v, want %q", c.args, err, c.want)
		}
	}
}

// IPA's _raid_root_device_mapping in get_os_install_device: an array made
// with is_root_volume false is dropped with its holders and members; the
// first made with true is the install device.
func TestRAIDRootDevice(t *testing.T) {
	disks := []inventory.Disk{{Name: "/dev/sda"}, {Name: "/dev/sdb"}, {Name: "/dev/sdc"}, {Name: "/dev/md0"}, {Name: "/dev/md1"}}
	names := func(ds []inventory.Disk) string {
		var s []string
		for _, d := range ds {
			s = append(s, d.Name)
		}
		return strings.Join(s, " ")
	}
	g := &GenericManager{}
	if root, rest := g.raidRootDevice(disks); root != "" || names(rest) != names(disks) {
		t.Errorf("no arrays made: %q, %s", root, names(rest))
	}
	yes, no := true, false
	g.rememberRootVolumes(raid.Created{
		Plan: raid.Plan{Volumes: []raid.Volume{
			{Device: "/dev/md0", Holders: []string{"/dev/sda", "/dev/sdb"}, Components: []string{"/dev/sda1", "/dev/sdb1"}},
			{Device: "/dev/md1", Holders: []string{"/dev/sda", "/dev/sdb", "/dev/sdc"}, Components: []string{"/dev/sda2", "/dev/sdb2", "/dev/sdc1"}},
		}},
		RootVolumes: map[string]bool{"/dev/md0": no},
	})
	if root, rest := g.raidRootDevice(disks); root != "" || names(rest) != "/dev/sdc /dev/md1" {
		t.Errorf("md0 not a root volume: %q, %s; want /dev/sdc /dev/md1 left", root, names(rest))
	}
	g = &GenericManager{}
	g.rememberRootVolumes(raid.Created{
		Plan:        raid.Plan{Volumes: []raid.Volume{{Device: "/dev/md0"}, {Device: "/dev/md1"}}},
		RootVolumes: map[string]bool{"/dev/md0": yes, "/dev/md1": no},
	})
	if root, _ := g.raidRootDevice(disks); root != "/dev/md0" {
		t.Errorf("root volume %q, want /dev/md0", root)
	}
}
