package e2e

import (
	"net"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/lifecycle"
	"github.com/ironic-go/ironic-agent/internal/testbed/standin"
)

// TestHarnessStateMachine checks the harness alone: a node enrolls, goes
// manageable and, without cleaning, available; the APIs answer.
func TestHarnessStateMachine(t *testing.T) {
	s := need(t)
	ctx := t.Context()
	no := false
	n := ironic.Enroll(t, t.Context(), s.ironic, ironic.NodeSpec{Name: "harness-sm", AutomatedClean: &no}, "52:54:e2:00:00:01")
	s.driver(t, s.ironic, n.UUID, agentOpts{}).Change(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, 30*time.Second)
	got, err := s.ironic.Ports(ctx, ports.ListOpts{NodeUUID: n.UUID})
	if err != nil || len(got) != 1 || got[0].Address != "52:54:e2:00:00:01" {
		t.Fatalf("ports = %+v, %v", got, err)
	}
}

// TestHarnessStandIn drives automated cleaning with the test bed's
// stand-in agent (internal/testbed/standin: the agent's lookup and
// heartbeat client, every command answered at once), to prove the
// harness's Ironic config (lookup, token, heartbeat, callback) without
// our agent binary.
func TestHarnessStandIn(t *testing.T) {
	s := need(t)
	ctx := t.Context()
	const mac = "52:54:e2:00:00:02"
	n := ironic.Enroll(t, t.Context(), s.ironic, ironic.NodeSpec{Name: "harness-standin"}, mac)
	// The lifecycle driver with the stand-in as the ramdisk it boots.
	d := &lifecycle.Driver[*standin.Running]{T: t, Ctx: ctx, Ironic: s.ironic, Node: n.UUID, Boot: func() (*standin.Running, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		// Ironic >= 26 refuses a plain-http callback ([agent]require_tls);
		// the stand-in then serves TLS, as auto-TLS does.
		return standin.New(standin.Config{IronicURL: s.services.IronicURL, MACs: []string{mac}, Listener: ln, TLS: s.series.RequiresTLS(), LookupTimeout: time.Minute}).Start(ctx), nil
	}}
	agent, _ := d.Start(nodes.ProvisionStateOpts{Target: nodes.TargetProvide})
	defer func() {
		agent.Kill()
		if err := agent.Err(); err != nil {
			t.Errorf("stand-in: %v", err)
		}
	}()
	// Each accepted heartbeat moves the conductor on (get_clean_steps,
	// the steps, finishing cleaning).
	if _, err := s.ironic.WaitState(ctx, n.UUID, "available", 2*time.Minute); err != nil {
		t.Fatalf("%v; the stand-in got %v", err, agent.Received())
	}
	if got := agent.Received(); len(got) == 0 || got[0].Name != "clean.get_clean_steps" {
		t.Errorf("commands from Ironic = %v, want clean.get_clean_steps first", got)
	}
}
