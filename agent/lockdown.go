package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/ironic-go/ironic-agent/agent/command"
	"github.com/ironic-go/ironic-agent/collector"
)

// bindLockdown is system.lockdown (IPA 10+): Ironic sends it when a node
// must not be powered off (disable_power_off) instead of powering the
// ramdisk down, then polls until the agent stops answering. The command
// answers first; then the API and the heartbeats stop, every NIC goes
// down, and the process stays alive doing nothing, since an exit would
// make the ramdisk's init start a fresh, reachable agent.
func (a *Agent) bindLockdown(p command.Params) (command.Func, error) {
	if err := noParams(p); err != nil {
		return nil, err
	}
	return func(context.Context) (any, error) {
		a.mu.Lock()
		a.lockedDown = true
		a.mu.Unlock()
		a.log.Warn("locking the agent down on request: the API and heartbeats stop, then every NIC goes down")
		go a.StopServing()
		return nil, nil
	}, nil
}

// isLockedDown reports whether system.lockdown ran.
func (a *Agent) isLockedDown() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lockedDown
}

// lockdownSystem brings the NICs down once the API has stopped (IPA's
// _lockdown_system) and then waits for ctx: only a signal ends a locked
// down agent. A NIC that cannot be brought down is logged, as IPA does.
func (a *Agent) lockdownSystem(ctx context.Context) {
	a.log.Info("locking down the system after the API stopped")
	if err := a.opts.Hooks.LockdownNICs(ctx); err != nil {
		a.log.Warn("could not bring every interface down", "error", err)
	}
	a.log.Info(EventLockedDown)
	<-ctx.Done()
}

// defaultLockdownNICs is Options.Hooks.LockdownNICs when none is given: the
// machine's candidate NICs (IPA's netutils.list_interfaces: physical
// devices, bonds, VLANs) brought down through netlink. An agent whose
// inventory is a fixture tree or was handed in (tests) is not on the
// machine it describes: it touches no NIC.
func (a *Agent) defaultLockdownNICs(context.Context) error {
	if a.injectedInventory || !a.liveMachine() {
		a.log.Warn("lockdown: the inventory is not this machine's: no interface brought down", "inventory_root", a.cfg.InventoryRoot)
		return nil
	}
	names, err := collector.InterfaceNames(collector.Options{Root: "/"})
	if err != nil {
		return fmt.Errorf("listing interfaces: %w", err)
	}
	return LinksDown(names, a.log.Info)
}

// LinksDown sets each named link down (ip link set NAME down) in the
// calling thread's network namespace, trying every one; the error joins
// the failures, each naming its link.
func LinksDown(names []string, logf func(msg string, args ...any)) error {
	var errs []error
	for _, n := range names {
		l, err := netlink.LinkByName(n)
		if err == nil {
			err = netlink.LinkSetDown(l)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("bring interface %s down: %w", n, err))
			continue
		}
		logf("interface brought down", "interface", n)
	}
	return errors.Join(errs...)
}
