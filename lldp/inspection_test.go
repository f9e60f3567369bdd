package lldp

import (
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/inventory"
)

func TestInspectionRawShape(t *testing.T) {
	inv := &inventory.Inventory{Interfaces: []inventory.Interface{{Name: "lo"}, {Name: "eth0"}, {Name: "eth1"}}}
	var asked []string
	capture := func(_ context.Context, ifaces []string, _ time.Duration, _ *slog.Logger) (map[string][]inventory.LLDPTLV, error) {
		asked = ifaces
		return map[string][]inventory.LLDPTLV{"eth0": ParseFrame(mustHex(t, ipaVector)), "eth1": {}}, nil
	}
	raw := inspectionRaw(t.Context(), inv, time.Second, nil, capture)
	if !reflect.DeepEqual(asked, []string{"eth0", "eth1"}) {
		t.Errorf("listened on %v, want eth0 and eth1 (never lo)", asked)
	}
	b, _ := json.Marshal(map[string]any{"lldp_raw": raw})
	want := `{"lldp_raw":{"eth0":[[0,""],[1,"04885a92ec5459"],[2,"0545746865726e6574312f3138"],[3,"0078"]],"eth1":[]}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	empty, _ := json.Marshal(inspectionRaw(t.Context(), &inventory.Inventory{}, time.Second, nil, capture))
	if string(empty) != "{}" {
		t.Errorf("no interfaces: got %s, want {}", empty)
	}
}

func TestCapturerFailsWhenNothingListens(t *testing.T) {
	got, err := Capturer{}.Capture(t.Context(), []string{"nosuchnic0"}, time.Second)
	if err == nil || len(got) != 0 {
		t.Errorf("got %v, %v; want no data and an error", got, err)
	}
}
