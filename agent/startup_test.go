package agent

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/inventory"
)

// The start-up waits run on the injected clock: a minute of waiting for a
// NIC and ten root-disk attempts take no real time, and the deadline is
// the clock's.
func TestStartupWaitsUseClock(t *testing.T) {
	clock := &fakeClock{now: time.Unix(0, 0)}
	collected := 0
	a := &Agent{
		cfg: &config.Config{DiskWaitAttempts: 10, DiskWaitDelay: 3 * time.Second},
		log: slog.New(slog.DiscardHandler),
		opts: Options{Hooks: Hooks{
			Clock:         clock,
			InterfaceWait: time.Minute,
			Inventory: func(context.Context) (*inventory.Inventory, error) {
				collected++
				return &inventory.Inventory{}, nil
			},
			Disks: func(context.Context) ([]inventory.Disk, error) { return nil, nil },
		}},
	}
	ctx := context.Background()
	start := time.Now()
	if _, err := a.waitForInterfaces(ctx); err != nil {
		t.Fatal(err)
	}
	// Every 5 s until past the 60 s deadline: at 0, 5, ... 65 s.
	if collected != 14 || !clock.Now().Equal(time.Unix(65, 0)) {
		t.Errorf("collected %d times, clock at %v", collected, clock.Now().Unix())
	}
	if err := a.waitForRootDisk(ctx); err != nil {
		t.Fatal(err)
	}
	if got := clock.Now().Sub(time.Unix(65, 0)); got != 27*time.Second {
		t.Errorf("root disk wait took %v on the clock, want 9 delays of 3 s", got)
	}
	if real := time.Since(start); real > 5*time.Second {
		t.Errorf("the waits slept %v of real time", real)
	}
}

// waitForDHCP waits as IPA's inspector.wait_for_dhcp does: for every NIC
// with ipa-inspection-dhcp-all-interfaces, else for the BOOTIF NIC only,
// naming the NICs it waits for, and gives up at the timeout naming those
// still without an IPv4 address.
func TestWaitForDHCP(t *testing.T) {
	addr := "192.0.2.7"
	nic := func(name, mac string, v4 bool) inventory.Interface {
		i := inventory.Interface{Name: name, MACAddress: mac}
		if v4 {
			i.IPv4Address = &addr
		}
		return i
	}
	for _, tc := range []struct {
		name    string
		all     bool
		bootif  string
		readyAt int // the collection from which eth1 has an address; 0: never
		want    []string
		polls   int
	}{
		{name: "all, eth1 late", all: true, readyAt: 3, polls: 3,
			want: []string{EventWaitingForDHCP, "interfaces=[eth1]", EventDHCPAddressesReady}},
		{name: "all, eth1 never", all: true, polls: 16,
			want: []string{EventWaitingForDHCP, EventDHCPWaitTimedOut, "interfaces=[eth1]", "waited=30s"}},
		{name: "bootif has its address", bootif: "01-52-54-00-00-00-01", polls: 0},
		{name: "bootif waits", bootif: "01-52-54-00-00-00-02", readyAt: 1, polls: 1,
			want: []string{EventWaitingForDHCP, "bootif=52:54:00:00:00:02", EventDHCPAddressesReady}},
		{name: "neither", polls: 0, want: []string{"no PXE boot interface known"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(0, 0)}
			var logs strings.Builder
			polls := 0
			inv := func() *inventory.Inventory {
				return &inventory.Inventory{Interfaces: []inventory.Interface{
					nic("eth0", "52:54:00:00:00:01", true),
					nic("eth1", "52:54:00:00:00:02", tc.readyAt > 0 && polls >= tc.readyAt),
				}}
			}
			a := &Agent{
				cfg: &config.Config{InspectionDHCPWaitTimeout: 30 * time.Second, InspectionDHCPAllInterfaces: tc.all, BootIF: tc.bootif},
				log: slog.New(slog.NewTextHandler(&logs, nil)),
				opts: Options{Hooks: Hooks{
					Clock: clock,
					Inventory: func(context.Context) (*inventory.Inventory, error) {
						polls++
						return inv(), nil
					},
				}},
			}
			got := a.waitForDHCP(context.Background(), inv())
			if polls != tc.polls {
				t.Errorf("collected %d times, want %d", polls, tc.polls)
			}
			for _, w := range tc.want {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("log lacks %q:\n%s", w, logs.String())
				}
			}
			if tc.readyAt > 0 && got.Interfaces[1].IPv4Address == nil {
				t.Errorf("returned the inventory before eth1 had its address")
			}
		})
	}
}
