package vm

import (
	"context"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

// The Ironic side of a scenario: enrolling a node and reading back what
// inspection stored.

// inspectedInventory is the inventory ironic-inspector stored for the node.
func inspectedInventory(t *testing.T, ctx context.Context, s *suite, nodeUUID string) map[string]any {
	t.Helper()
	data := s.inspectionData(t, ctx, nodeUUID, time.Minute)
	inv, _ := data["inventory"].(map[string]any)
	if inv == nil {
		t.Fatalf("introspection data has no inventory: %v", keys(data))
	}
	return inv
}

// enroll creates a node with a port per MAC (the first one PXE-enabled;
// an empty one is no port), deleted when the test ends, and brings it to
// manageable.
func enroll(t *testing.T, ctx context.Context, s *suite, spec ironic.NodeSpec, macs [2]string) *nodes.Node {
	t.Helper()
	node, err := s.ironic.CreateNode(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.ironic.DeleteNode(context.Background(), node.UUID) })
	for i, mac := range macs {
		if mac == "" {
			continue
		}
		if _, err := s.ironic.CreatePort(ctx, node.UUID, mac, i == 0); err != nil {
			t.Fatal(err)
		}
	}
	return provision(t, ctx, s.ironic, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetManage}, time.Minute)
}
