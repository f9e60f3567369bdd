package agent

import (
	"context"
	"encoding/json"

	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/raid"
	"github.com/ironic-go/ironic-agent/internal/pyconv"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// The software RAID steps (raid interface): delete_configuration and
// create_configuration (clean, and service in IPA's list), and
// apply_configuration (deploy and service). Each binding decodes IPA's
// arguments and calls deploy/raid over the disks the agent may touch.
// The service-step table can list raidDeleteStep, raidCreateStep and
// raidApplyStep as they are.

// raidSystem is deploy/raid over this machine, confined as the agent is.
func (g *GenericManager) raidSystem() (*raid.System, error) {
	if g.agent != nil && !g.agent.liveMachine() {
		return nil, ipaerror.Wrap("SoftwareRAIDError", 500, "Software RAID caused unknown error",
			"the inventory is a fixture tree ("+g.agent.cfg.InventoryRoot+"), not this machine: no RAID is built on it", nil)
	}
	return &raid.System{Root: "/", Runner: blockdev.ExecRunner{}, Guard: blockdev.NewGuard(g.AllowedDevices), Log: g.Log}, nil
}

// raidStart gives a RAID step its system and request (the disks it may
// touch), and forgets the image last written: the disks will not hold it.
func (g *GenericManager) raidStart(ctx context.Context, req hwmgr.Request) (*raid.System, raid.Request, error) {
	s, err := g.raidSystem()
	if err != nil {
		return nil, raid.Request{}, err
	}
	disks, err := g.Disks(ctx)
	if err != nil {
		return nil, raid.Request{}, err
	}
	if g.agent != nil {
		g.agent.images.forget()
	}
	return s, raid.Request{Node: req.Node, Disks: disks}, nil
}

// raidDeleteStep is delete_configuration; like IPA's, its result is null.
func (g *GenericManager) raidDeleteStep(ctx context.Context, req hwmgr.Request) (any, error) {
	s, r, err := g.raidStart(ctx, req)
	if err != nil {
		return nil, err
	}
	_, err = s.Delete(ctx, r)
	return nil, err
}

// raidCreateStep is create_configuration over the node's
// target_raid_config: the configuration as given, {} when there is none
// or none of it is software RAID.
func (g *GenericManager) raidCreateStep(ctx context.Context, req hwmgr.Request) (any, error) {
	s, r, err := g.raidStart(ctx, req)
	if err != nil {
		return nil, err
	}
	created, err := s.CreateFromNode(ctx, r)
	return createdResult(created), err
}

// raidApplyStep is apply_configuration: raid_config validated, the
// existing arrays deleted unless delete_existing is false, then created.
func (g *GenericManager) raidApplyStep(ctx context.Context, req hwmgr.Request) (any, error) {
	raw, ok := req.Args["raid_config"]
	if !ok {
		return nil, ipaerror.InvalidCommandParams("apply_configuration needs raid_config")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, ipaerror.InvalidCommandParams("raid_config: %v", err)
	}
	cfg, err := raid.ParseConfig(v)
	if err != nil {
		return nil, err
	}
	deleteExisting := true
	if raw, ok := req.Args["delete_existing"]; ok {
		var d any
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, ipaerror.InvalidCommandParams("delete_existing: %v", err)
		}
		if d != nil {
			if deleteExisting, err = pyconv.Bool(d); err != nil {
				return nil, ipaerror.InvalidCommandParams("delete_existing: %v", err)
			}
		}
	}
	s, r, err := g.raidStart(ctx, req)
	if err != nil {
		return nil, err
	}
	nodeUUID, _ := req.Node["uuid"].(string)
	if err := cfg.Validate(nodeUUID, raid.SkipVolumeNames(req.Node), len(r.Disks)); err != nil {
		return nil, err
	}
	if deleteExisting {
		if _, err := s.Delete(ctx, r); err != nil {
			return nil, err
		}
	}
	created, err := s.Create(ctx, r, cfg)
	return createdResult(created), err
}

func createdResult(c raid.Created) any {
	if c.Config == nil {
		return map[string]any{}
	}
	return c.Config
}

// assembleRAID is IPA's initialize: `mdadm --assemble --scan` before the
// disks are listed, so arrays made earlier (by create_configuration or
// an installed OS) appear in the inventory. Only when asked
// (Options.AssembleRAID), on the live machine, for an agent that is not
// confined to allowed devices.
func (a *Agent) assembleRAID(ctx context.Context) {
	if !a.opts.AssembleRAID || !a.liveMachine() || len(a.cfg.AllowedDevices) > 0 {
		return
	}
	s := &raid.System{Root: "/", Runner: blockdev.ExecRunner{}, Guard: blockdev.NewGuard(nil), Log: a.log}
	s.Assemble(ctx)
}

// withoutSkippedArrays drops the md arrays the node keeps by volume_name
// (and, with includeWipe, their wiped neighbours) from disks, as IPA's
// list_block_devices_check_skip_list; on a fixture tree there are no
// arrays to ask about.
func (g *GenericManager) withoutSkippedArrays(ctx context.Context, node map[string]any, disks []inventory.Disk, includeWipe bool) ([]inventory.Disk, error) {
	if g.agent != nil && !g.agent.liveMachine() {
		return disks, nil
	}
	s := &raid.System{Root: "/", Runner: blockdev.ExecRunner{}, Guard: blockdev.NewGuard(g.AllowedDevices), Log: g.Log}
	return s.WithoutSkippedArrays(ctx, node, disks, includeWipe)
}

// eraseDisks are the disks the erase steps go over.
func (g *GenericManager) eraseDisks(ctx context.Context, node map[string]any) ([]inventory.Disk, error) {
	disks, err := g.Disks(ctx)
	if err != nil {
		return nil, err
	}
	return g.withoutSkippedArrays(ctx, node, disks, true)
}

// installDisks are the disks a deploy chooses its install disk from.
func (a *Agent) installDisks(ctx context.Context) ([]inventory.Disk, error) {
	disks, err := a.generic.Disks(ctx)
	if err != nil {
		return nil, err
	}
	return a.generic.withoutSkippedArrays(ctx, a.Node(), disks, false)
}
