package agent

import (
	"log/slog"
	"reflect"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/agent/hwmgr"
	"github.com/ironic-go/ironic-agent/inventory"
	"github.com/ironic-go/ironic-agent/lldp"
)

// An agent reading a fixture tree never listens on this machine's NICs:
// the fixture's NIC names are not its own (the e2e agents read the CI
// machine's fixture, whose eth0 is also the host's).
func TestNoLiveLLDPCaptureForAFixtureTree(t *testing.T) {
	for root, live := range map[string]bool{"": true, "/": true, "//": true, "../fixtures/x/root": false, "/tmp/fx/root": false} {
		a := &Agent{cfg: &config.Config{InventoryRoot: root}}
		if got := a.liveMachine(); got != live {
			t.Errorf("inventory_root %q: liveMachine %v, want %v", root, got, live)
		}
		_, isLive := a.lldpCapturer().(lldp.Capturer)
		if isLive != live {
			t.Errorf("inventory_root %q: capturer %T", root, a.lldpCapturer())
		}
	}
	inv := &inventory.Inventory{Interfaces: []inventory.Interface{{Name: "lo"}, {Name: "eth0"}, {Name: "eth1"}}}
	fixture := &Agent{cfg: &config.Config{InventoryRoot: "/tmp/fx/root"}}
	got := lldp.InspectionRawFrom(t.Context(), inv, 0, nil, fixture.lldpCapturer())
	want := map[string][]inventory.LLDPTLV{"eth0": {}, "eth1": {}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lldp_raw of a fixture tree: %v; want %v", got, want)
	}
}

// Nor does it delete this machine's crash records for erase_pstore.
func TestNoPstoreEraseForAFixtureTree(t *testing.T) {
	a := &Agent{cfg: &config.Config{InventoryRoot: t.TempDir()}}
	g := &GenericManager{agent: a, Log: slog.New(slog.DiscardHandler)}
	got, err := g.erasePstore(t.Context(), hwmgr.Request{})
	if want := map[string]any{"removed": []string{}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("erase_pstore with a fixture tree: %v, %v; want %v", got, err, want)
	}
}
