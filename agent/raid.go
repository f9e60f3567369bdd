package agent

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/deploy"
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
	g.rememberRootVolumes(created)
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
	g.rememberRootVolumes(created)
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
// an installed OS) appear in the inventory. Unless
// Options.SkipRAIDAssembly, on the live machine, for an agent that is not
// confined to allowed devices.
func (a *Agent) assembleRAID(ctx context.Context) {
	if a.opts.SkipRAIDAssembly || !a.liveMachine() || len(a.cfg.AllowedDevices) > 0 {
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

// raidRootVolumes is IPA's _raid_root_device_mapping: the is_root_volume
// of each array create_configuration or apply_configuration made, in the
// order made. Like IPA's, it lives in memory only: an agent started again
// (a deploy after cleaning without fast-track) has none, and the install
// disk then comes from root-device hints or the smallest disk, which is
// the RAID-1 root in the usual layout.
type raidRootVolumes struct {
	mu      sync.Mutex
	volumes []raidRootVolume
}

type raidRootVolume struct {
	device string
	isRoot bool
	// holders and components are excluded with a volume marked false.
	holders, components []string
}

// rememberRootVolumes records the arrays that said is_root_volume.
func (g *GenericManager) rememberRootVolumes(c raid.Created) {
	var vs []raidRootVolume
	for _, v := range c.Plan.Volumes {
		if root, ok := c.RootVolumes[v.Device]; ok {
			vs = append(vs, raidRootVolume{device: v.Device, isRoot: root, holders: v.Holders, components: v.Components})
		}
	}
	g.raidRoots.mu.Lock()
	defer g.raidRoots.mu.Unlock()
	g.raidRoots.volumes = append(g.raidRoots.volumes, vs...)
}

// raidRootDevice is the RAID half of IPA's get_os_install_device: the
// first array created with is_root_volume true is the install device
// (root-device hints notwithstanding); arrays created with it false are
// dropped from disks before that, with their holder disks and member
// partitions, so they are never chosen.
func (g *GenericManager) raidRootDevice(disks []inventory.Disk) (root string, rest []inventory.Disk) {
	g.raidRoots.mu.Lock()
	defer g.raidRoots.mu.Unlock()
	rest = disks
	for _, v := range g.raidRoots.volumes {
		if v.isRoot {
			return v.device, rest
		}
		g.logger().Debug("excluding a RAID volume and its holder disks from the possible root devices", "device", v.device, "holders", v.holders, "partitions", v.components)
		rest = slices.DeleteFunc(slices.Clone(rest), func(d inventory.Disk) bool {
			return d.Name == v.device || slices.Contains(v.holders, d.Name) || slices.Contains(v.components, d.Name)
		})
	}
	return "", rest
}

// installDevice is get_os_install_device over disks (installDisks): the
// disk a deploy writes, reads the image's boot loader from and writes the
// config drive to.
func (a *Agent) installDevice(guard *blockdev.Guard, disks []inventory.Disk) (inventory.Disk, error) {
	root, rest := a.generic.raidRootDevice(disks)
	if root == "" {
		return deploy.InstallDevice(guard, rest, a.Node())
	}
	if h, err := deploy.RootDeviceHintsOf(a.Node()); err == nil && !h.IsEmpty() {
		a.log.Warn("both root device hints and a root volume from the target RAID configuration are defined; the RAID root volume is used", "hints", h.String(), "device", root)
	}
	a.log.Debug("using the root volume from the target RAID configuration", "device", root)
	for _, d := range disks {
		if d.Name == root {
			return d, nil
		}
	}
	return inventory.Disk{Name: root}, nil
}
