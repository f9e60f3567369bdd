package ironic

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetalintrospection/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetalintrospection/v1/introspection"
)

// InspectorClient is gophercloud's baremetalintrospection/v1 client for an
// ironic-inspector without authentication (noauth).
type InspectorClient struct {
	Service *gophercloud.ServiceClient
}

// NewInspectorClient returns a client for ironic-inspector at baseURL
// (without /v1).
func NewInspectorClient(baseURL string) (*InspectorClient, error) {
	sc, err := noauth.NewBareMetalIntrospectionNoAuth(noauth.EndpointOpts{IronicInspectorEndpoint: baseURL + "/v1/"})
	if err != nil {
		return nil, fmt.Errorf("ironic-inspector client for %s: %w", baseURL, err)
	}
	sc.HTTPClient = http.Client{Timeout: 30 * time.Second}
	return &InspectorClient{Service: sc}, nil
}

// Data returns the stored introspection data of a node (store_data=database)
// as JSON decoded into a map: the tests look at keys gophercloud's
// introspection.Data does not model (the agent's own collectors').
func (c *InspectorClient) Data(ctx context.Context, nodeUUID string) (map[string]any, error) {
	var d map[string]any
	if err := introspection.GetIntrospectionData(ctx, c.Service, nodeUUID).ExtractInto(&d); err != nil {
		return nil, explain(err)
	}
	return d, nil
}

// WaitFinished polls the status every 500 ms until introspection finished.
func (c *InspectorClient) WaitFinished(ctx context.Context, nodeUUID string, timeout time.Duration) (*introspection.Introspection, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		st, err := introspection.GetIntrospectionStatus(ctx, c.Service, nodeUUID).Extract()
		if err == nil && st.Finished {
			return st, nil
		}
		if err != nil {
			last = explain(err)
		} else {
			last = fmt.Errorf("state %q", st.State)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("introspection of %s not finished within %s: %v", nodeUUID, timeout, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
