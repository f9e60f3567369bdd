package agent

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/inventory"
)

func TestLogVLANs(t *testing.T) {
	var buf strings.Builder
	addr := "10.78.0.50"
	inv := &inventory.Inventory{Interfaces: []inventory.Interface{
		{Name: "eth0"}, {Name: "eth0.100", IPv4Address: &addr}, {Name: "eth1.200"}, {Name: "br.x"},
	}}
	a := &Agent{cfg: &config.Config{EnableVLANInterfaces: "all"}, log: slog.New(slog.NewTextHandler(&buf, nil))}
	a.logVLANs(inv)
	if got := buf.String(); !strings.Contains(got, `value=all vlan_interfaces="[eth0.100=10.78.0.50 eth1.200=no IPv4 address]"`) {
		t.Errorf("log: %s", got)
	}
	buf.Reset()
	a.cfg.EnableVLANInterfaces = ""
	a.logVLANs(inv)
	if buf.Len() != 0 {
		t.Errorf("logged without the option: %s", buf.String())
	}
}
