package ironictest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// APIVersion is the microversion the test speaks to Ironic as an operator:
// the maximum of Ironic 21.4.
const APIVersion = "1.82"

// Client speaks Ironic's REST API without authentication (noauth).
type Client struct {
	BaseURL string
	HTTP    *http.Client
}

// NewClient returns a client for the Ironic API at baseURL.
func NewClient(baseURL string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// APIError is a non-2xx answer, with Ironic's faultstring unwrapped.
type APIError struct {
	Method, URL string
	Status      int
	Message     string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.URL, e.Status, e.Message)
}

// do sends body (if not nil) as JSON and decodes a 2xx answer into out (if
// not nil).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := c.BaseURL + path
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", APIVersion)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		return &APIError{Method: method, URL: u, Status: resp.StatusCode, Message: faultString(data)}
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decoding %q: %w", method, u, tail(string(data), 500), err)
	}
	return nil
}

// faultString takes the message out of Ironic's error envelope
// {"error_message": "<JSON string with faultstring>"}, or returns the body.
func faultString(body []byte) string {
	var env struct {
		ErrorMessage json.RawMessage `json:"error_message"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.ErrorMessage) == 0 {
		return tail(string(body), 1000)
	}
	var inner struct {
		FaultString string `json:"faultstring"`
	}
	var s string
	if json.Unmarshal(env.ErrorMessage, &s) == nil {
		if json.Unmarshal([]byte(s), &inner) == nil && inner.FaultString != "" {
			return inner.FaultString
		}
		return s
	}
	if json.Unmarshal(env.ErrorMessage, &inner) == nil && inner.FaultString != "" {
		return inner.FaultString
	}
	return string(env.ErrorMessage)
}

// driverRegistered succeeds once a conductor offers driver.
func (c *Client) driverRegistered(ctx context.Context, driver string) error {
	var out struct {
		Drivers []struct {
			Name string `json:"name"`
		} `json:"drivers"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/drivers", nil, &out); err != nil {
		return err
	}
	for _, d := range out.Drivers {
		if d.Name == driver {
			return nil
		}
	}
	return fmt.Errorf("no conductor offers %s yet", driver)
}

// Node is the part of Ironic's node the tests look at; Raw keeps the rest.
type Node struct {
	UUID                 string         `json:"uuid"`
	Name                 string         `json:"name"`
	Driver               string         `json:"driver"`
	ProvisionState       string         `json:"provision_state"`
	TargetProvisionState *string        `json:"target_provision_state"`
	PowerState           *string        `json:"power_state"`
	LastError            *string        `json:"last_error"`
	Properties           map[string]any `json:"properties"`
	InstanceInfo         map[string]any `json:"instance_info"`
	DriverInternalInfo   map[string]any `json:"driver_internal_info"`
	CleanStep            map[string]any `json:"clean_step"`
	DeployStep           map[string]any `json:"deploy_step"`
	InspectInterface     string         `json:"inspect_interface"`
	Extra                map[string]any `json:"extra"`
	Raw                  map[string]any `json:"-"`
}

// NodeSpec describes a node to enroll.
type NodeSpec struct {
	Name string
	// InspectInterface is "no-inspect" (default) or "inspector".
	InspectInterface string
	// AutomatedClean, when not nil, sets the node's own automated_clean.
	AutomatedClean *bool
	// Properties are merged over the defaults (cpus 2, memory_mb 2048,
	// local_gb 10, cpu_arch x86_64, capabilities boot_mode:uefi, vendor
	// lenovo); a nil value removes a default.
	Properties map[string]any
	// InstanceInfo is set on the node as given.
	InstanceInfo map[string]any
}

// CreateNode enrolls a fake-hardware node. vendor "lenovo" matters: at the
// end of a UEFI deploy Debian's Ironic 21.4.4 skips set_boot_device(disk),
// which the fake management interface would reject, only for that vendor.
func (c *Client) CreateNode(ctx context.Context, spec NodeSpec) (*Node, error) {
	props := map[string]any{
		"cpus":         2,
		"memory_mb":    2048,
		"local_gb":     10,
		"cpu_arch":     "x86_64",
		"capabilities": "boot_mode:uefi",
		"vendor":       "lenovo",
	}
	for k, v := range spec.Properties {
		if v == nil {
			delete(props, k)
			continue
		}
		props[k] = v
	}
	inspect := spec.InspectInterface
	if inspect == "" {
		inspect = "no-inspect"
	}
	body := map[string]any{
		"driver":               "fake-hardware",
		"boot_interface":       "fake",
		"deploy_interface":     "direct",
		"power_interface":      "fake",
		"management_interface": "fake",
		"network_interface":    "noop",
		"inspect_interface":    inspect,
		"raid_interface":       "agent",
		"properties":           props,
	}
	if spec.Name != "" {
		body["name"] = spec.Name
	}
	if spec.AutomatedClean != nil {
		body["automated_clean"] = *spec.AutomatedClean
	}
	if spec.InstanceInfo != nil {
		body["instance_info"] = spec.InstanceInfo
	}
	var n Node
	if err := c.do(ctx, http.MethodPost, "/v1/nodes", body, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// GetNode returns the node by UUID or name.
func (c *Client) GetNode(ctx context.Context, ident string) (*Node, error) {
	var raw map[string]any
	if err := c.do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(ident), nil, &raw); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(raw)
	var n Node
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	n.Raw = raw
	return &n, nil
}

// DeleteNode deletes the node; nodes in an active or waiting state must be
// put into maintenance first, which this does.
func (c *Client) DeleteNode(ctx context.Context, ident string) error {
	_ = c.do(ctx, http.MethodPut, "/v1/nodes/"+url.PathEscape(ident)+"/maintenance", map[string]any{"reason": "test cleanup"}, nil)
	return c.do(ctx, http.MethodDelete, "/v1/nodes/"+url.PathEscape(ident), nil, nil)
}

// Patch applies a JSON patch (RFC 6902) to the node.
func (c *Client) Patch(ctx context.Context, ident string, ops []map[string]any) error {
	return c.do(ctx, http.MethodPatch, "/v1/nodes/"+url.PathEscape(ident), ops, nil)
}

// Port is an Ironic port.
type Port struct {
	UUID       string `json:"uuid"`
	Address    string `json:"address"`
	NodeUUID   string `json:"node_uuid"`
	PXEEnabled bool   `json:"pxe_enabled"`
}

// CreatePort adds a port with mac to the node.
func (c *Client) CreatePort(ctx context.Context, nodeUUID, mac string, pxe bool) (*Port, error) {
	var p Port
	err := c.do(ctx, http.MethodPost, "/v1/ports", map[string]any{"node_uuid": nodeUUID, "address": mac, "pxe_enabled": pxe}, &p)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// Ports lists the ports of a node.
func (c *Client) Ports(ctx context.Context, nodeUUID string) ([]Port, error) {
	var out struct {
		Ports []Port `json:"ports"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/ports?detail=true&node_uuid="+url.QueryEscape(nodeUUID), nil, &out); err != nil {
		return nil, err
	}
	return out.Ports, nil
}

// PortByAddress returns the port with mac, or nil if there is none.
func (c *Client) PortByAddress(ctx context.Context, mac string) (*Port, error) {
	var out struct {
		Ports []Port `json:"ports"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/ports?detail=true&address="+url.QueryEscape(mac), nil, &out); err != nil {
		return nil, err
	}
	if len(out.Ports) == 0 {
		return nil, nil
	}
	return &out.Ports[0], nil
}

// CleanStep is one step of manual cleaning.
type CleanStep struct {
	Interface string         `json:"interface"`
	Step      string         `json:"step"`
	Args      map[string]any `json:"args,omitempty"`
}

// Provision asks for a provision-state transition ("manage", "provide",
// "inspect", "deploy", "abort", ...).
func (c *Client) Provision(ctx context.Context, ident, target string) error {
	return c.do(ctx, http.MethodPut, "/v1/nodes/"+url.PathEscape(ident)+"/states/provision", map[string]any{"target": target}, nil)
}

// Deploy asks for "active" with a config drive (a gzipped, base64 ISO, a
// URL, or a JSON object Ironic builds into one), as Nova sends it.
func (c *Client) Deploy(ctx context.Context, ident string, configdrive any) error {
	return c.do(ctx, http.MethodPut, "/v1/nodes/"+url.PathEscape(ident)+"/states/provision",
		map[string]any{"target": "active", "configdrive": configdrive}, nil)
}

// Clean starts manual cleaning with steps.
func (c *Client) Clean(ctx context.Context, ident string, steps []CleanStep) error {
	return c.do(ctx, http.MethodPut, "/v1/nodes/"+url.PathEscape(ident)+"/states/provision",
		map[string]any{"target": "clean", "clean_steps": steps}, nil)
}

// isFailureState says whether a wait should end early when the node lands
// in state instead of the one waited for.
func isFailureState(state string) bool {
	switch state {
	case "clean failed", "deploy failed", "inspect failed", "rescue failed", "error", "adopt failed":
		return true
	}
	return false
}

// WaitState polls the node every 500 ms until its provision_state is want. It fails early when the node lands in a failure
// state other than want, and on timeout; both errors name the state,
// target, step and last_error.
func (c *Client) WaitState(ctx context.Context, ident, want string, timeout time.Duration) (*Node, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *Node
	var lastErr error
	for {
		n, err := c.GetNode(ctx, ident)
		if err == nil {
			last = n
			// A wait state ("clean wait") has a target; it counts as
			// reached. A failure state may keep its target too.
			if n.ProvisionState == want {
				return n, nil
			}
			if isFailureState(n.ProvisionState) {
				return n, fmt.Errorf("node %s reached %q while waiting for %q: %s", ident, n.ProvisionState, want, describe(n))
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				return nil, fmt.Errorf("node %s not in %q after %s: %v", ident, want, timeout, lastErr)
			}
			return last, fmt.Errorf("node %s not in %q after %s: %s", ident, want, timeout, describe(last))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// WaitFor polls the node every 500 ms until cond holds.
func (c *Client) WaitFor(ctx context.Context, ident string, timeout time.Duration, what string, cond func(*Node) bool) (*Node, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *Node
	for {
		if n, err := c.GetNode(ctx, ident); err == nil {
			last = n
			if cond(n) {
				return n, nil
			}
		}
		select {
		case <-ctx.Done():
			if last == nil {
				return nil, fmt.Errorf("node %s: %s: not seen within %s", ident, what, timeout)
			}
			return last, fmt.Errorf("node %s: %s: not seen within %s: %s", ident, what, timeout, describe(last))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func describe(n *Node) string {
	s := fmt.Sprintf("provision_state %q", n.ProvisionState)
	if n.TargetProvisionState != nil {
		s += fmt.Sprintf(", target %q", *n.TargetProvisionState)
	}
	if len(n.CleanStep) > 0 {
		s += fmt.Sprintf(", clean_step %v", n.CleanStep)
	}
	if len(n.DeployStep) > 0 {
		s += fmt.Sprintf(", deploy_step %v", n.DeployStep)
	}
	if n.LastError != nil {
		s += fmt.Sprintf(", last_error %q", *n.LastError)
	}
	return s
}

// Describe is a one-line summary of the node's state for test messages.
func (n *Node) Describe() string { return describe(n) }

// IsNotFound reports whether err is Ironic's 404.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}
