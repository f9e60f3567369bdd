package ironic

import (
	"context"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// Stack is a running Ironic (and ironic-inspector where it runs) with its
// clients: the suite-wide services of a test binary, or a test's own.
type Stack struct {
	*Services
	Ironic *Client
	// Inspector is nil when ironic-inspector does not run (Config.NoInspector,
	// or a series without it).
	Inspector *InspectorClient
	// Took is what StartStack took: installing the series when it was
	// missing, the databases, the services coming up.
	Took time.Duration
}

// StartStack installs cfg.Series (Install) unless cfg.RootFS already names
// its root filesystem, makes cfg.Dir, starts the services and makes their
// clients. On error nothing it started runs.
func StartStack(ctx context.Context, cfg Config) (*Stack, error) {
	start := time.Now()
	if cfg.Dir == "" {
		return nil, errors.New("testbed ironic: StartStack: Config.Dir is required")
	}
	if cfg.RootFS == "" {
		series := cfg.Series
		if series == "" {
			series = Series2023_1
		}
		in, err := Install(ctx, series)
		if err != nil {
			return nil, err
		}
		cfg = in.Config(cfg)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	svc, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	st := &Stack{Services: svc}
	if st.Ironic, err = svc.Client(); err == nil && !svc.cfg.NoInspector {
		st.Inspector, err = svc.InspectorClient()
	}
	if err != nil {
		_ = svc.Close()
		return nil, err
	}
	st.Took = time.Since(start)
	return st, nil
}

// StartForTest is StartStack for an Ironic of t's own (cfg.Dir empty: a
// directory of t.TempDir()). The services stop when t ends; if t fails,
// its log gets what they logged while it ran.
func StartForTest(t testing.TB, ctx context.Context, cfg Config) *Stack {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	st, err := StartStack(ctx, cfg)
	if err != nil {
		t.Fatalf("start an Ironic of the test's own: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	LogOnFailure(t, st.Services)
	return st
}

// LogOnFailure puts what svc logs from now until t ends into t's log if t
// fails.
func LogOnFailure(t testing.TB, svc *Services) {
	mark := svc.Mark()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Ironic's logs during the test:\n%s", mark.Since(64<<10))
		}
	})
}

// Enroll creates spec's node with a port per MAC (the first one
// PXE-enabled; an empty MAC is no port), deletes it when t ends, and
// brings it to manageable.
func Enroll(t testing.TB, ctx context.Context, c *Client, spec NodeSpec, macs ...string) *nodes.Node {
	t.Helper()
	n, err := c.CreateNode(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.DeleteNode(context.Background(), n.UUID); err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			t.Logf("deleting node %s: %v", n.UUID, err)
		}
	})
	for i, mac := range macs {
		if mac == "" {
			continue
		}
		if _, err := c.CreatePort(ctx, n.UUID, mac, i == 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Provision(ctx, n.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetManage}); err != nil {
		t.Fatal(err)
	}
	n, err = c.WaitState(ctx, n.UUID, "manageable", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
