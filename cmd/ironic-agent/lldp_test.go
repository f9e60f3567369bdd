package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
)

func TestLLDPCommandFlags(t *testing.T) {
	for _, args := range [][]string{
		{"lldp", "--format", "yaml"},
		{"lldp", "--timeout", "0s"},
	} {
		var out, errb bytes.Buffer
		if code := runMain(t.Context(), args, &out, &errb); code != 1 {
			t.Errorf("%v: exit %d, want 1 (stderr %q)", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := runMain(t.Context(), []string{"lldp", "--bogus"}, &out, &errb); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}
}

// TestLLDPCommandShowsLLDPDNeighbour runs "ironic-agent lldp" in a network
// namespace whose NIC is cabled (a veth pair) to Debian's lldpd.
func TestLLDPCommandShowsLLDPDNeighbour(t *testing.T) {
	netnstest.RequireRoot(t, "lldpd", "lldpcli")
	id := netnstest.ID(t)
	host, sw := netnstest.NewNetns(t, "lldpc-h-"+id), netnstest.NewNetns(t, "lldpc-s-"+id)
	nic, port := "ch"+id, "cs"+id
	host.Veth(nic, sw, port)
	lldpd := sw.StartLLDPD([]string{port}, []string{
		"configure system hostname cmd-test-switch",
		"configure lldp tx-interval 1",
		"configure ports " + port + " lldp portidsubtype local Ethernet9/9",
		"configure ports " + port + " lldp custom-tlv add oui 00,80,c2 subtype 3 oui-info 00,2a,06,74,65,6e,61,6e,74", // VLAN 42 "tenant"
	})
	if err := lldpd.WaitReady(t.Context(), "cmd-test-switch"); err != nil {
		t.Fatal(err)
	}

	run := func(format string) string {
		var out, errb bytes.Buffer
		var code int
		if err := netnstest.Do(host.Name, func() error {
			code = runMain(t.Context(), []string{"lldp", "--interface", nic, "--timeout", "20s", "--format", format}, &out, &errb)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if code != 0 {
			t.Fatalf("ironic-agent lldp --format %s: exit %d\n%s", format, code, errb.String())
		}
		return out.String()
	}

	var report map[string]struct {
		LLDP     [][2]any `json:"lldp"`
		Neighbor struct {
			SystemName string `json:"system_name"`
			PortID     string `json:"port_id"`
			VLANs      []struct {
				ID   int    `json:"id"`
				Name string `json:"name"`
			} `json:"vlans"`
		} `json:"neighbor"`
	}
	js := run("json")
	if err := json.Unmarshal([]byte(js), &report); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	r := report[nic]
	if r.Neighbor.SystemName != "cmd-test-switch" || r.Neighbor.PortID != "Ethernet9/9" ||
		len(r.Neighbor.VLANs) != 1 || r.Neighbor.VLANs[0].ID != 42 || r.Neighbor.VLANs[0].Name != "tenant" {
		t.Errorf("unexpected neighbour:\n%s", js)
	}
	if len(r.LLDP) == 0 {
		t.Errorf("no raw TLVs:\n%s", js)
	}

	table := run("table")
	t.Logf("table:\n%s", table)
	for _, want := range []string{nic, "cmd-test-switch", "Ethernet9/9", "42(tenant)"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}
