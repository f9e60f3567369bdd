package lldp

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
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

func TestInterfacesIPARule(t *testing.T) {
	root := t.TempDir()
	nic(t, root, "eth0", "0000:01:00.0", "e1000e")
	for _, d := range []string{"bond0/bonding", "eth0.100", "br0/bridge", "lo", "veth1", "eth0.x"} {
		if err := os.MkdirAll(filepath.Join(root, "sys/class/net", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Interfaces(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"bond0", "eth0", "eth0.100"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestCapturerFailsWhenNothingListens(t *testing.T) {
	got, err := Capturer{}.Capture(t.Context(), []string{"nosuchnic0"}, time.Second)
	if err == nil || len(got) != 0 {
		t.Errorf("got %v, %v; want no data and an error", got, err)
	}
}
