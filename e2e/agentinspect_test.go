package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/inventory"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

// needAgentInspection ends a test of Ironic's built-in inspection on a
// series without it (2023.1: Ironic 21.4 has no /v1/continue_inspection).
func (s *suite) needAgentInspection(t *testing.T) {
	t.Helper()
	if !s.series.HasAgentInspection() {
		t.Skipf("SKIPPED: Ironic series %s has no built-in inspection (/v1/continue_inspection is Ironic >= 22.1); run with %s=2025.1 or 2026.1", s.series, ironic.SeriesEnv)
	}
}

// agentInspectionCollectors are what the agent runs: IPA's defaults plus
// the LLDP frames local-link-connection and parse-lldp read.
var agentInspectionCollectors = []string{"--inspection-collectors", "default,logs,lldp", "--lldp-timeout", "2"}

// TestAgentInspectEnrolledNode: a node with the agent inspect interface
// (built-in inspection, what Metal3 runs) goes to inspect wait; the agent
// posts to <ironic>/v1/continue_inspection; Ironic's hooks store
// properties, the port and the root disk, and GET /v1/nodes/{node}/inventory
// returns the inventory and plugin data, decoded with gophercloud's types.
func TestAgentInspectEnrolledNode(t *testing.T) {
	s := need(t)
	s.needAgentInspection(t)
	const mac = "52:54:e2:1e:00:01"
	n := ironic.Enroll(t, t.Context(), s.ironic, ironic.NodeSpec{Name: "e2e-agent-inspect",
		InspectInterface: "agent",
		Properties:       map[string]any{"cpus": nil, "memory_mb": nil, "local_gb": nil, "cpu_arch": nil},
	}, mac)
	s.driver(t, s.ironic, n.UUID, agentOpts{MAC: mac, InspectionURL: s.services.IronicURL + "/v1/continue_inspection", Extra: agentInspectionCollectors}).
		Inspect(stepTimeout)
	s.checkAgentInspection(t, n.UUID, mac)
}

// TestAgentDiscovery: an unknown machine's agent posts to
// /v1/continue_inspection; Ironic's [auto_discovery] enrolls it (as
// ironic-inspector's enroll hook did) with its port and inspected data.
func TestAgentDiscovery(t *testing.T) {
	s := need(t)
	s.needAgentInspection(t)
	const mac = "52:54:e2:1d:00:01"
	a := s.startAgent(t, agentOpts{MAC: mac, InspectionURL: s.services.IronicURL + "/v1/continue_inspection", Extra: agentInspectionCollectors})
	port := s.waitPort(t, a, mac, 90*time.Second)
	t.Cleanup(func() { _ = s.ironic.DeleteNode(context.Background(), port.NodeUUID) })
	n := s.checkAgentInspection(t, port.NodeUUID, mac)
	if n.Driver != "fake-hardware" || n.ProvisionState != "enroll" {
		t.Errorf("discovered node: driver %q, state %q; want fake-hardware in enroll", n.Driver, n.ProvisionState)
	}
	if err := a.WaitLog(t.Context(), "lookup", 30*time.Second); err != nil {
		t.Error(err)
	}
	if dead, err := a.Exited(); dead {
		t.Errorf("agent exited after inspection: %v", err)
	}
}

// checkAgentInspection checks what the hooks stored for the fixture
// machine and returns the node: properties (memory, architecture, root disk; cpus only where
// Ironic has the cpus hook), a port per NIC, and the stored inventory and
// plugin data.
func (s *suite) checkAgentInspection(t *testing.T, uuid, mac string) *nodes.Node {
	t.Helper()
	ctx := t.Context()
	want := s.fixtureFacts(t)
	// Ironic stores the inventory after every hook ran (and saved its
	// part of the node); a discovered node gets there while the test
	// already sees its port.
	var data *nodes.InventoryData
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		data, err = nodes.GetInventory(ctx, s.ironic.Service, uuid).Extract()
		if err == nil {
			break
		}
		if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) || time.Now().After(deadline) {
			t.Fatalf("GET /v1/nodes/%s/inventory: %v", uuid, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	n, err := s.ironic.GetNode(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	props := n.Properties
	if got, ok := propInt(props, "memory_mb"); !ok || got != want.MemoryMB {
		t.Errorf("properties.memory_mb = %v, want %d (memory hook)", props["memory_mb"], want.MemoryMB)
	}
	if props["cpu_arch"] != "x86_64" {
		t.Errorf("properties.cpu_arch = %v, want x86_64 (architecture hook)", props["cpu_arch"])
	}
	if got, ok := propInt(props, "local_gb"); !ok || got != want.RootDiskGB {
		t.Errorf("properties.local_gb = %v, want %d (root-device hook: root disk GiB - 1)", props["local_gb"], want.RootDiskGB)
	}
	if s.series == ironic.Series2026_1 {
		if got, ok := propInt(props, "cpus"); !ok || got != want.CPUs {
			t.Errorf("properties.cpus = %v, want %d (cpus hook)", props["cpus"], want.CPUs)
		}
	}
	ps, err := s.ironic.Ports(ctx, ports.ListOpts{NodeUUID: uuid})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ps, func(p ports.Port) bool { return p.Address == mac }) {
		t.Errorf("node %s ports %+v: none with %s (ports hook)", n.UUID, ps, mac)
	}
	if !slices.ContainsFunc(data.Inventory.Interfaces, func(i inventory.InterfaceType) bool { return i.MACAddress == mac }) {
		t.Errorf("stored inventory interfaces %+v: none with %s", data.Inventory.Interfaces, mac)
	}
	if data.Inventory.Memory.PhysicalMb != want.MemoryMB || data.Inventory.CPU.Count != want.CPUs {
		t.Errorf("stored inventory: memory %d MiB, %d CPUs; want %d, %d", data.Inventory.Memory.PhysicalMb, data.Inventory.CPU.Count, want.MemoryMB, want.CPUs)
	}
	pd, err := data.PluginData.AsStandardData()
	if err != nil {
		t.Fatalf("plugin data: %v", err)
	}
	if pd.RootDisk.Name == "" {
		t.Errorf("plugin data has no root_disk (root-device hook)")
	}
	if len(pd.ValidInterfaces) == 0 || len(pd.MACs) == 0 {
		t.Errorf("plugin data: valid_interfaces %v, macs %v; want the NIC (validate-interfaces hook)", pd.ValidInterfaces, pd.MACs)
	}
	if pd.RawLLDP == nil {
		t.Errorf("plugin data has no lldp_raw (lldp collector)")
	}
	raw, err := data.PluginData.AsMap()
	if err != nil {
		t.Fatal(err)
	}
	if raw["error"] != nil {
		t.Errorf("plugin data error = %v, want null", raw["error"])
	}
	if discovered := raw["auto_discovered"] == true; discovered != (n.ProvisionState == "enroll") {
		t.Errorf("plugin data auto_discovered = %v for a node in %s", raw["auto_discovered"], n.ProvisionState)
	}
	return n
}
