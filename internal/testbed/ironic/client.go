package ironic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/drivers"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"

	"github.com/ironic-go/ironic-agent/agent/ironic"
)

// APIVersion is the microversion the test speaks to Ironic as an operator:
// the maximum of Ironic 21.4.
const APIVersion = "1.82"

// Client is gophercloud's baremetal/v1 client for an Ironic without
// authentication (noauth), plus the few compositions the tests repeat:
// enrolling a fake-hardware node, and waiting for a state.
type Client struct {
	Service *gophercloud.ServiceClient
}

// NewClient returns a client for the Ironic API at baseURL (without /v1).
func NewClient(baseURL string) (*Client, error) {
	sc, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: baseURL + "/v1/"})
	if err != nil {
		return nil, fmt.Errorf("ironic client for %s: %w", baseURL, err)
	}
	sc.Microversion = APIVersion
	sc.HTTPClient = http.Client{Timeout: 30 * time.Second}
	return &Client{Service: sc}, nil
}

// explain puts Ironic's own message (its faultstring) in front of a
// gophercloud error, whose text otherwise carries Ironic's envelope: a JSON
// string inside JSON. The gophercloud error stays in the chain, so
// gophercloud.ResponseCodeIs still answers.
func explain(err error) error {
	var ue gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &ue) {
		return err
	}
	return &apiError{msg: fmt.Sprintf("%s %s: HTTP %d: %s", ue.Method, ue.URL, ue.Actual, ironic.ErrorText(ue.Body)), err: err}
}

type apiError struct {
	msg string
	err error
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.err }

// driverRegistered succeeds once a conductor offers driver.
func (c *Client) driverRegistered(ctx context.Context, driver string) error {
	page, err := drivers.ListDrivers(c.Service, drivers.ListDriversOpts{}).AllPages(ctx)
	if err != nil {
		return explain(err)
	}
	all, err := drivers.ExtractDrivers(page)
	if err != nil {
		return err
	}
	for _, d := range all {
		if d.Name == driver {
			return nil
		}
	}
	return fmt.Errorf("no conductor offers %s yet", driver)
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
	// IPMI, when set, is the driver_info of an ipmi node (ipmitool power
	// and management, pxe boot; Config.IPMI) instead of fake-hardware.
	IPMI map[string]any
	// BootInterface replaces an ipmi node's pxe (ipxe: Config.NetBoot)
	// or a redfish node's redfish-virtual-media (pxe: Config.IPMI).
	BootInterface string
	// Redfish, when set, is the driver_info of a redfish node (redfish
	// power and management, redfish-virtual-media boot; Config.Redfish).
	Redfish map[string]any
}

// createWithInstanceInfo is nodes.CreateOpts with instance_info, which
// Ironic accepts when a node is created but gophercloud's CreateOpts lacks.
type createWithInstanceInfo struct {
	nodes.CreateOpts
	instanceInfo map[string]any
}

func (o createWithInstanceInfo) ToNodeCreateMap() (map[string]any, error) {
	m, err := o.CreateOpts.ToNodeCreateMap()
	if err == nil && o.instanceInfo != nil {
		m["instance_info"] = o.instanceInfo
	}
	return m, err
}

// CreateNode enrolls a fake-hardware node. vendor "lenovo" matters: at the
// end of a UEFI deploy Debian's Ironic 21.4.4 skips set_boot_device(disk),
// which the fake management interface would reject, only for that vendor.
func (c *Client) CreateNode(ctx context.Context, spec NodeSpec) (*nodes.Node, error) {
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
	opts := createWithInstanceInfo{CreateOpts: nodes.CreateOpts{
		Name:                spec.Name,
		Driver:              "fake-hardware",
		BootInterface:       "fake",
		DeployInterface:     "direct",
		PowerInterface:      "fake",
		ManagementInterface: "fake",
		NetworkInterface:    "noop",
		InspectInterface:    inspect,
		RAIDInterface:       "agent",
		Properties:          props,
		AutomatedClean:      spec.AutomatedClean,
	}, instanceInfo: spec.InstanceInfo}
	if spec.IPMI != nil {
		opts.Driver, opts.DriverInfo = "ipmi", spec.IPMI
		opts.BootInterface, opts.PowerInterface, opts.ManagementInterface = "pxe", "ipmitool", "ipmitool"
		if spec.BootInterface != "" {
			opts.BootInterface = spec.BootInterface
		}
	}
	if spec.Redfish != nil {
		opts.Driver, opts.DriverInfo = "redfish", spec.Redfish
		opts.BootInterface, opts.PowerInterface, opts.ManagementInterface = "redfish-virtual-media", "redfish", "redfish"
		if spec.BootInterface != "" {
			opts.BootInterface = spec.BootInterface
		}
	}
	n, err := nodes.Create(ctx, c.Service, opts).Extract()
	return n, explain(err)
}

// GetNode returns the node by UUID or name.
func (c *Client) GetNode(ctx context.Context, ident string) (*nodes.Node, error) {
	n, err := nodes.Get(ctx, c.Service, ident).Extract()
	return n, explain(err)
}

// DeleteNode deletes the node; nodes in an active or waiting state must be
// put into maintenance first, which this does.
func (c *Client) DeleteNode(ctx context.Context, ident string) error {
	_ = nodes.SetMaintenance(ctx, c.Service, ident, nodes.MaintenanceOpts{Reason: "test cleanup"}).ExtractErr()
	return explain(nodes.Delete(ctx, c.Service, ident).ExtractErr())
}

// CreatePort adds a port with mac to the node.
func (c *Client) CreatePort(ctx context.Context, nodeUUID, mac string, pxe bool) (*ports.Port, error) {
	p, err := ports.Create(ctx, c.Service, ports.CreateOpts{NodeUUID: nodeUUID, Address: mac, PXEEnabled: &pxe}).Extract()
	return p, explain(err)
}

// Ports lists the ports with the given filter, with details.
func (c *Client) Ports(ctx context.Context, filter ports.ListOpts) ([]ports.Port, error) {
	page, err := ports.ListDetail(c.Service, filter).AllPages(ctx)
	if err != nil {
		return nil, explain(err)
	}
	return ports.ExtractPorts(page)
}

// Provision asks for a provision-state change: opts.Target with, for
// "clean", the steps and, for "active", the config drive.
func (c *Client) Provision(ctx context.Context, ident string, opts nodes.ProvisionStateOpts) error {
	return explain(nodes.ChangeProvisionState(ctx, c.Service, ident, opts).ExtractErr())
}

// FailureState says whether state is one of Ironic's failure states,
// where a provision-state change that failed stops: the FAILURE_STATES of
// Ironic's ironic/common/states.py, and "error", where a failed tear-down
// stops. A wait for another state ends there.
func FailureState(state string) bool {
	switch state {
	case "deploy failed", "clean failed", "inspect failed", "rescue failed", "unrescue failed",
		"adopt failed", "service failed", "error":
		return true
	}
	return false
}

// WaitState polls the node every 500 ms until its provision_state is
// want. A wait state ("clean wait") has a target; it counts as reached. It
// fails early when the node lands in a failure state other than want, and
// on timeout; both errors name the state, target, step and last_error.
func (c *Client) WaitState(ctx context.Context, ident, want string, timeout time.Duration) (*nodes.Node, error) {
	n, err := c.WaitFor(ctx, ident, timeout, fmt.Sprintf("provision_state %q", want), func(n *nodes.Node) bool {
		return n.ProvisionState == want || FailureState(n.ProvisionState)
	})
	if err == nil && n.ProvisionState != want {
		return n, fmt.Errorf("node %s reached %q while waiting for %q: %s", ident, n.ProvisionState, want, Describe(n))
	}
	return n, err
}

// WaitFor polls the node every 500 ms until cond holds.
func (c *Client) WaitFor(ctx context.Context, ident string, timeout time.Duration, what string, cond func(*nodes.Node) bool) (*nodes.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *nodes.Node
	var lastErr error
	for {
		n, err := c.GetNode(ctx, ident)
		if err == nil {
			last = n
			if cond(n) {
				return n, nil
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				return nil, fmt.Errorf("node %s: %s: not seen within %s: %v", ident, what, timeout, lastErr)
			}
			return last, fmt.Errorf("node %s: %s: not seen within %s: %s", ident, what, timeout, Describe(last))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Describe is a one-line summary of the node's state for test messages.
func Describe(n *nodes.Node) string {
	s := fmt.Sprintf("provision_state %q", n.ProvisionState)
	if n.TargetProvisionState != "" {
		s += fmt.Sprintf(", target %q", n.TargetProvisionState)
	}
	if len(n.CleanStep) > 0 {
		s += fmt.Sprintf(", clean_step %v", n.CleanStep)
	}
	if len(n.DeployStep) > 0 {
		s += fmt.Sprintf(", deploy_step %v", n.DeployStep)
	}
	if n.LastError != "" {
		s += fmt.Sprintf(", last_error %q", n.LastError)
	}
	return s
}

// PortByAddress returns the port with mac, or nil if there is none.
func (c *Client) PortByAddress(ctx context.Context, mac string) (*ports.Port, error) {
	found, err := c.Ports(ctx, ports.ListOpts{Address: mac})
	if err != nil || len(found) == 0 {
		return nil, err
	}
	return &found[0], nil
}
