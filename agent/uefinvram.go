package agent

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/deploy/bootloader"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// cleanUEFINVRAMStep is clean_uefi_nvram (clean and deploy step, IPA
// 9.12+): delete the NVRAM boot entries whose device path matches one of
// match_patterns (default: IPA's). Anything but a list of valid patterns
// is IPA's InvalidCommandParamsError. The result lists the entries
// deleted, where IPA returns null.
func (g *GenericManager) cleanUEFINVRAMStep(ctx context.Context, req hwmgr.Request) (any, error) {
	raw := req.Args["match_patterns"]
	patterns := bootloader.DefaultCleanNVRAMPatterns()
	if len(raw) > 0 && string(raw) != "null" {
		invalid := ipaerror.InvalidCommandParams("The match_patterns must be a list of strings: %s", raw)
		var items []any
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, invalid
		}
		patterns = patterns[:0]
		for _, it := range items {
			s, ok := it.(string)
			if !ok {
				return nil, invalid
			}
			patterns = append(patterns, s)
		}
	}
	res, err := bootloader.CompileNVRAMPatterns(patterns)
	if err != nil {
		return nil, ipaerror.InvalidCommandParams("The match_patterns must be a list of strings: %v", err)
	}
	if g.agent == nil {
		return nil, errors.New("clean_uefi_nvram: no agent, no UEFI variables")
	}
	if !g.agent.liveMachine() && g.agent.opts.EFIVars == "" {
		// A fixture tree's agent (the end-to-end tests') is not on the
		// machine it describes: this machine's boot entries are not its own.
		g.logger().Warn("clean_uefi_nvram: the inventory is a fixture tree, not this machine: no boot entry deleted", "inventory_root", g.agent.cfg.InventoryRoot)
		return map[string]any{"deleted": []string{}}, nil
	}
	// A machine without efivarfs (BIOS boot) fails the step, as IPA's
	// efibootmgr does there.
	deleted, err := bootloader.CleanNVRAM(ctx, g.logger(), g.agent.efivars(), res)
	if err != nil {
		return nil, err
	}
	return map[string]any{"deleted": deleted}, nil
}
