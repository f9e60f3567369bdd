package agent

import (
	"context"
	"fmt"

	"github.com/ironic-go/ironic-agent/internal/sntp"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// syncClock is IPA's utils.sync_clock: with ntp_server set, measure the
// offset from that server and step the system clock by it. The agent does
// it, not the init: ntp_server may come from the agent's config file as
// well as the kernel command line, and the agent is what needs the right
// time (its auto-TLS certificate's validity, image downloads over TLS) and
// syncs again before power_off and run_image, as IPA does. An agent whose
// inventory is a fixture tree is not on the machine it describes (the
// end-to-end tests run it on the test host): it measures and logs, and
// leaves the clock alone.
func (a *Agent) syncClock(ctx context.Context) error {
	server := a.cfg.NTPServer
	if server == "" {
		return nil
	}
	query := a.opts.Hooks.NTP
	if query == nil {
		query = sntp.Client{}.Query
	}
	s, err := query(ctx, server)
	if err != nil {
		return fmt.Errorf("clock sync: %w", err)
	}
	if !a.liveMachine() {
		a.log.Warn("clock not set: the inventory is a fixture tree, not this machine", "ntp_server", server,
			"offset", s.Offset, "delay", s.Delay, "inventory_root", a.cfg.InventoryRoot)
		return nil
	}
	if err := a.machine.StepClock(s.Offset); err != nil {
		return fmt.Errorf("clock sync with %s: %w", server, err)
	}
	a.log.Info(EventClockSetFromNTP, "ntp_server", server, "address", s.Server.String(),
		"offset", s.Offset, "delay", s.Delay, "stratum", s.Stratum)
	return nil
}

// syncClockAtStart runs before anything else at start-up, as in IPA's
// run(): errors are logged unless fail_if_clock_not_set makes them fatal
// (the init then restarts the agent, which tries again).
func (a *Agent) syncClockAtStart(ctx context.Context) error {
	err := a.syncClock(ctx)
	if err == nil {
		return nil
	}
	if a.cfg.FailIfClockNotSet {
		return fmt.Errorf("%w (fail_if_clock_not_set)", err)
	}
	a.log.Error("clock not set; going on", "error", err)
	return nil
}

// syncClocksBeforeShutdown is IPA's standby._sync_clock(ignore_errors=True)
// before power_off and run_image: the system clock from NTP, then the
// hardware clock from the system clock (hwclock --systohc, which IPA runs
// with or without ntp_server) so the instance boots with the time the
// ramdisk had. Failures are logged; with fail_if_clock_not_set the
// command fails with IPA's ClockSyncError and the machine stays up.
func (a *Agent) syncClocksBeforeShutdown(ctx context.Context) error {
	err := a.syncClock(ctx)
	if err != nil && !a.cfg.FailIfClockNotSet {
		// IPA's sync_clock logs and returns; hwclock still runs.
		a.log.Error("clock not set before shutdown", "error", err)
		err = nil
	}
	if err == nil {
		err = a.writeRTC(ctx)
	}
	if err == nil {
		return nil
	}
	a.log.Error("Failed to sync hardware clock", "error", err)
	if a.cfg.FailIfClockNotSet {
		return ipaerror.New("ClockSyncError", 500, "Error syncing system clock", "Failed to sync hardware clock: "+err.Error())
	}
	return nil
}

func (a *Agent) writeRTC(ctx context.Context) error {
	if !a.liveMachine() {
		a.log.Warn("hardware clock not written: the inventory is a fixture tree, not this machine", "inventory_root", a.cfg.InventoryRoot)
		return nil
	}
	if err := a.machine.WriteRTC(ctx); err != nil {
		return fmt.Errorf("writing the hardware clock: %w", err)
	}
	return nil
}
