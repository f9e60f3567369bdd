package ironictest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// InspectorClient speaks ironic-inspector's API (noauth).
type InspectorClient struct {
	BaseURL string
	HTTP    *http.Client
}

// NewInspectorClient returns a client for ironic-inspector at baseURL.
func NewInspectorClient(baseURL string) *InspectorClient {
	return &InspectorClient{BaseURL: strings.TrimRight(baseURL, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// IntrospectionStatus is GET /v1/introspection/<uuid>.
type IntrospectionStatus struct {
	UUID     string  `json:"uuid"`
	Finished bool    `json:"finished"`
	State    string  `json:"state"`
	Error    *string `json:"error"`
}

func (c *InspectorClient) get(ctx context.Context, path string, out any) error {
	u := c.BaseURL + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("GET %s: reading the answer: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		// Inspector's envelope is {"error": {"message": "..."}}.
		var env struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		msg := tail(string(data), 1000)
		if json.Unmarshal(data, &env) == nil && env.Error.Message != "" {
			msg = env.Error.Message
		}
		return &APIError{Method: http.MethodGet, URL: u, Status: resp.StatusCode, Message: msg}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("GET %s: decoding: %w", u, err)
	}
	return nil
}

// Status returns the introspection status of a node.
func (c *InspectorClient) Status(ctx context.Context, nodeUUID string) (*IntrospectionStatus, error) {
	var st IntrospectionStatus
	if err := c.get(ctx, "/v1/introspection/"+url.PathEscape(nodeUUID), &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Data returns the stored introspection data of a node (store_data=database).
func (c *InspectorClient) Data(ctx context.Context, nodeUUID string) (map[string]any, error) {
	var d map[string]any
	if err := c.get(ctx, "/v1/introspection/"+url.PathEscape(nodeUUID)+"/data", &d); err != nil {
		return nil, err
	}
	return d, nil
}

// WaitFinished polls the status every 500 ms until introspection finished.
func (c *InspectorClient) WaitFinished(ctx context.Context, nodeUUID string, timeout time.Duration) (*IntrospectionStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		st, err := c.Status(ctx, nodeUUID)
		if err == nil && st.Finished {
			return st, nil
		}
		if err != nil {
			last = err
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
