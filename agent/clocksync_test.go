package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/internal/sntp"
)

// fakeNTP answers every query with offset, or fails with err; it records
// the servers asked. The clock is only ever stepped on a fakeMachine.
type fakeNTP struct {
	offset time.Duration
	mu     sync.Mutex
	err    error
	asked  chan string
}

func (f *fakeNTP) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *fakeNTP) query(_ context.Context, server string) (sntp.Sample, error) {
	select {
	case f.asked <- server:
	default:
	}
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return sntp.Sample{}, err
	}
	return sntp.Sample{Server: netip.MustParseAddrPort("192.0.2.1:123"), Offset: f.offset, Delay: time.Millisecond, Stratum: 2}, nil
}

func newFakeNTP(offset time.Duration, err error) *fakeNTP {
	return &fakeNTP{offset: offset, err: err, asked: make(chan string, 10)}
}

func machineActions(m *fakeMachine) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.actions, ",")
}

func TestClockSetAtStartAndBeforeShutdown(t *testing.T) {
	m := &fakeMachine{}
	ntp := newFakeNTP(time.Hour, nil)
	ra := standalone(t, Options{Hooks: Hooks{Machine: m, NTP: ntp.query, ShutdownDelay: time.Millisecond}},
		map[string]string{"ntp_server": "[2001:db8::123]"})
	if got := <-ntp.asked; got != "[2001:db8::123]" {
		t.Errorf("asked %q", got)
	}
	// Before the API served: the step came first.
	if got := machineActions(m); got != "step-clock 1h0m0s" {
		t.Errorf("machine actions at start: %q", got)
	}
	if !strings.Contains(ra.log.String(), "clock set from NTP") {
		t.Errorf("no log of the step")
	}
	code, r := call(t, ra, "standby.power_off", map[string]any{})
	if code != 200 || r["command_status"] != "SUCCEEDED" {
		t.Fatalf("power_off %d %v", code, r)
	}
	if got := machineActions(m); got != "step-clock 1h0m0s,step-clock 1h0m0s,rtc,poweroff" {
		t.Errorf("machine actions: %q", got)
	}
}

func TestNoNTPServerLeavesTheClock(t *testing.T) {
	m := &fakeMachine{}
	ntp := newFakeNTP(time.Hour, nil)
	standalone(t, Options{Hooks: Hooks{Machine: m, NTP: ntp.query}}, nil)
	select {
	case s := <-ntp.asked:
		t.Errorf("asked %q without ntp_server", s)
	default:
	}
	if got := machineActions(m); got != "" {
		t.Errorf("machine actions: %q", got)
	}
}

// TestClockSyncFailureGoesOn: IPA's default (fail_if_clock_not_set false)
// logs and carries on, at start and before shutdown, where the hardware
// clock is still written.
func TestClockSyncFailureGoesOn(t *testing.T) {
	m := &fakeMachine{}
	ntp := newFakeNTP(0, errors.New("no reply"))
	ra := standalone(t, Options{Hooks: Hooks{Machine: m, NTP: ntp.query, ShutdownDelay: time.Millisecond}},
		map[string]string{"ntp_server": "192.0.2.1"})
	if !strings.Contains(ra.log.String(), "clock not set; going on") {
		t.Errorf("no log of the failure")
	}
	code, r := call(t, ra, "standby.run_image", map[string]any{})
	if code != 200 || r["command_status"] != "SUCCEEDED" {
		t.Fatalf("run_image %d %v", code, r)
	}
	if got := machineActions(m); got != "rtc,reboot" {
		t.Errorf("machine actions: %q", got)
	}
}

// TestFailIfClockNotSet: the agent does not start, and power_off fails
// with ClockSyncError without powering off.
func TestFailIfClockNotSet(t *testing.T) {
	cfg, err := config.Load(config.Inputs{Flags: map[string]string{"standalone": "true",
		"ntp_server": "192.0.2.1", "fail_if_clock_not_set": "true", "state_dir": t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeMachine{}
	a, err := New(t.Context(), Options{Config: cfg, Log: slog.New(slog.DiscardHandler), StateRoot: t.TempDir(),
		SkipRAIDAssembly: true, DisableMultipath: true,
		Hooks: Hooks{Machine: m, NTP: newFakeNTP(0, errors.New("no reply")).query, Inventory: testInventory,
			Ready: func(string) { t.Error("the API served") }}})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "clock sync: no reply (fail_if_clock_not_set)") {
		t.Fatalf("Run: %v", err)
	}

	ntp := newFakeNTP(0, nil)
	ra := standalone(t, Options{Hooks: Hooks{Machine: m, NTP: ntp.query, ShutdownDelay: time.Millisecond}},
		map[string]string{"ntp_server": "192.0.2.1", "fail_if_clock_not_set": "true"})
	ntp.fail(errors.New("no reply")) // read by the power_off below, after the start-up query
	code, r := call(t, ra, "standby.power_off", map[string]any{})
	if code != 200 || r["command_status"] != "FAILED" {
		t.Fatalf("power_off %d %v", code, r)
	}
	e, _ := r["command_error"].(map[string]any)
	if e["type"] != "ClockSyncError" || !strings.Contains(e["details"].(string), "Failed to sync hardware clock: clock sync: no reply") {
		t.Errorf("error %v", e)
	}
	if got := machineActions(m); got != "step-clock 0s" {
		t.Errorf("machine actions: %q", got)
	}
}

// TestFixtureTreeLeavesTheClock: an agent reading a fixture tree (the
// end-to-end tests run it so on the test host) measures, but sets neither
// clock.
func TestFixtureTreeLeavesTheClock(t *testing.T) {
	m := &fakeMachine{}
	ntp := newFakeNTP(time.Hour, nil)
	ra := standalone(t, Options{Hooks: Hooks{Machine: m, NTP: ntp.query, ShutdownDelay: time.Millisecond}},
		map[string]string{"ntp_server": "192.0.2.1", "inventory_root": t.TempDir()})
	code, r := call(t, ra, "standby.power_off", map[string]any{})
	if code != 200 || r["command_status"] != "SUCCEEDED" {
		t.Fatalf("power_off %d %v", code, r)
	}
	if got := machineActions(m); got != "poweroff" {
		t.Errorf("machine actions: %q", got)
	}
	if !strings.Contains(ra.log.String(), "clock not set: the inventory is a fixture tree") {
		t.Errorf("no log of the skip")
	}
}
