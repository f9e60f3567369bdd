package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/agent/inspect"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/inventory/hints"
	"github.com/ironic-go/ironic-agent/lldp"
)

// waitForRootDisk waits, like IPA's generic manager at start-up, for a
// disk the image could go to (the smallest of at least 4 GiB; hints are not
// known before lookup): disk_wait_attempts tries disk_wait_delay apart, then
// it goes on with a warning. A confined agent does not wait: its disks are
// named, and checked when a step uses them.
func (a *Agent) waitForRootDisk(ctx context.Context) error {
	if len(a.cfg.AllowedDevices) > 0 {
		return nil
	}
	for i := 0; i < a.cfg.DiskWaitAttempts; i++ {
		disks, err := a.Disks(ctx)
		if err == nil {
			if _, err = hints.ChooseRootDisk(hints.Disks(disks), nil); err == nil {
				return nil
			}
		}
		if i+1 == a.cfg.DiskWaitAttempts {
			a.log.Warn("no root disk candidate found; going on", "attempts", a.cfg.DiskWaitAttempts, "error", err)
			return nil
		}
		a.log.Info("waiting for a root disk candidate", "attempt", i+1, "error", err)
		if err := a.sleep(ctx, a.cfg.DiskWaitDelay); err != nil {
			return err
		}
	}
	return nil
}

// waitForInterfaces collects the inventory until it lists an interface
// with a MAC, for up to InterfaceWait (IPA waits 60 s, then goes on).
func (a *Agent) waitForInterfaces(ctx context.Context) (*inventory.Inventory, error) {
	deadline := a.opts.Hooks.Clock.Now().Add(a.opts.Hooks.InterfaceWait)
	for {
		inv, err := a.refreshInventory(ctx)
		if err != nil {
			return nil, fmt.Errorf("inventory: %w", err)
		}
		if len(inv.MACs()) > 0 {
			return inv, nil
		}
		if a.opts.Hooks.Clock.Now().After(deadline) {
			a.log.Warn("no network interface with a MAC address found; going on", "waited", a.opts.Hooks.InterfaceWait)
			return inv, nil
		}
		a.log.Info("waiting for a network interface with a MAC address")
		if err := a.sleep(ctx, min(5*time.Second, a.opts.Hooks.InterfaceWait)); err != nil {
			return nil, err
		}
	}
}

// NormalizeBOOTIF turns PXELINUX's "01-aa-bb-cc-dd-ee-ff" into
// "aa:bb:cc:dd:ee:ff" (IPA does this only for the DHCP wait; the inventory
// and inspection data keep the raw value).
func NormalizeBOOTIF(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) == 20 && strings.HasPrefix(s, "01-") {
		s = s[3:]
	}
	return strings.ReplaceAll(s, "-", ":")
}

// waitForDHCP waits, before inspection, until the PXE interface (or every
// interface with inspection_dhcp_all_interfaces) has an IPv4 address,
// polling every 2 s for up to inspection_dhcp_wait_timeout, as IPA's
// inspector.wait_for_dhcp does. Without BOOTIF and without the
// all-interfaces option there is nothing to wait for, which IPA warns of.
func (a *Agent) waitForDHCP(ctx context.Context, inv *inventory.Inventory) *inventory.Inventory {
	timeout := a.cfg.InspectionDHCPWaitTimeout
	if timeout <= 0 {
		return inv
	}
	pxe := NormalizeBOOTIF(a.cfg.BootIF)
	all := a.cfg.InspectionDHCPAllInterfaces
	if pxe == "" && !all {
		a.log.Warn("no PXE boot interface known (no BOOTIF): not waiting for its IPv4 address before inspection")
		return inv
	}
	missing := func(inv *inventory.Inventory) []string {
		var names []string
		for _, i := range inv.Interfaces {
			if (all || strings.EqualFold(i.MACAddress, pxe)) && i.IPv4Address == nil {
				names = append(names, i.Name)
			}
		}
		return names
	}
	waiting := missing(inv)
	if len(waiting) == 0 {
		return inv
	}
	a.log.Info(EventWaitingForDHCP, "interfaces", waiting, "all_interfaces", all, "bootif", pxe, "timeout", timeout)
	deadline := a.opts.Hooks.Clock.Now().Add(timeout)
	for len(waiting) > 0 {
		if a.opts.Hooks.Clock.Now().After(deadline) {
			a.log.Warn(EventDHCPWaitTimedOut, "interfaces", waiting, "waited", timeout, "bootif", pxe)
			return inv
		}
		if a.sleep(ctx, 2*time.Second) != nil {
			return inv
		}
		if fresh, err := a.refreshInventory(ctx); err == nil {
			inv = fresh
		}
		waiting = missing(inv)
	}
	a.log.Info(EventDHCPAddressesReady, "all_interfaces", all, "bootif", pxe)
	return inv
}

func (a *Agent) inspect(ctx context.Context, inv *inventory.Inventory) string {
	versions := a.managers.Versions()
	var mgrs []inspect.Manager
	for _, m := range a.managers.Managers() {
		mgrs = append(mgrs, inspect.Manager{Name: m.Name(), Version: versions[m.Name()]})
	}
	var candidates []inventory.Disk
	if len(a.cfg.AllowedDevices) > 0 {
		var err error
		if candidates, err = a.Disks(ctx); err != nil {
			a.log.Warn("cannot list the allowed devices for root_disk", "error", err)
		}
	}
	uuid, err := inspect.Run(ctx, inspect.Options{
		RootDiskCandidates: candidates,
		URL:                a.cfg.InspectionCallbackURL,
		HTTP:               a.http,
		Collectors:         a.cfg.InspectionCollectors,
		Benchmarks:         a.cfg.KernelParams["ipa-inspection-benchmarks"],
		Inventory:          inv,
		BootIF:             a.cfg.BootIF,
		Root:               a.cfg.InventoryRoot,
		Managers:           mgrs,
		Logs:               a.systemLogs,
		LLDPRaw: func(ctx context.Context) (map[string][]inventory.LLDPTLV, error) {
			return lldp.InspectionRawFrom(ctx, inv, a.cfg.LLDPTimeout, a.log, a.lldpCapturer()), nil
		},
		Log:       a.log,
		Backoff:   a.opts.Hooks.Backoff,
		Timeout:   a.cfg.LookupTimeout,
		RequestID: a.cfg.GlobalRequestID,
	})
	if err != nil {
		a.log.Error("inspection failed; proceeding with lookup", "error", err)
	}
	return uuid
}
