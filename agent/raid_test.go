package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/hwmgr"
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
