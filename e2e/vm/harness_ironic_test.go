package vm

import (
	"context"
	"testing"
	"time"
)

// The Ironic side of a scenario: reading back what inspection stored.

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
