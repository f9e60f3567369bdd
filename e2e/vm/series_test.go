package vm

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

// agentInspection says inspection goes through Ironic's built-in agent
// inspect interface: the series has no ironic-inspector (2026.1).
func (s *suite) agentInspection() bool { return !s.series.HasInspector() }

// inspectionArgs are the kernel parameters of an inspection boot: only the
// callback (ironic-inspector's /v1/continue, or Ironic's own
// /v1/continue_inspection), as Ironic's inspect interfaces pass it, so the
// agent posts its data and does not go on to look up the node.
func (s *suite) inspectionArgs() string {
	if s.agentInspection() {
		return "ipa-inspection-callback-url=http://" + guestHost + ":" + strconv.Itoa(ironicPort) + "/v1/continue_inspection"
	}
	return "ipa-inspection-callback-url=http://" + guestHost + ":" + strconv.Itoa(inspectorPort) + "/v1/continue"
}

// inspectInterface is the inspect interface of an enrolled node.
func (s *suite) inspectInterface() string {
	if s.agentInspection() {
		return "agent"
	}
	return "inspector"
}

// inspectionData waits until the inspection of node uuid has finished
// without error and returns what was stored, in ironic-inspector's shape:
// the plugin data with the inventory under "inventory".
func (s *suite) inspectionData(t *testing.T, ctx context.Context, uuid string, timeout time.Duration) map[string]any {
	t.Helper()
	if !s.agentInspection() {
		st, err := s.inspector.WaitFinished(ctx, uuid, timeout)
		if err != nil {
			t.Fatal(err)
		}
		if st.Error != "" {
			t.Fatalf("introspection of %s finished with error %q", uuid, st.Error)
		}
		data, err := s.inspector.Data(ctx, uuid)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	// Ironic stores the inventory once every hook ran; a discovered node
	// stays in enroll with no inspection_finished_at, so the record is
	// what says the inspection is over.
	var stored struct {
		Inventory  map[string]any `json:"inventory"`
		PluginData map[string]any `json:"plugin_data"`
	}
	deadline := time.Now().Add(timeout)
	for {
		err := nodes.GetInventory(ctx, s.ironic.Service, uuid).ExtractInto(&stored)
		if err == nil {
			break
		}
		if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			t.Fatalf("GET /v1/nodes/%s/inventory: %v", uuid, err)
		}
		n, nerr := s.ironic.GetNode(ctx, uuid)
		if nerr != nil {
			t.Fatal(nerr)
		}
		if n.LastError != "" {
			t.Fatalf("inspection of %s failed: %s", uuid, n.LastError)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no inventory stored for %s within %s: %s", uuid, timeout, ironic.Describe(n))
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
	data := stored.PluginData
	if data == nil {
		data = map[string]any{}
	}
	data["inventory"] = stored.Inventory
	return data
}
