// Package agentclient is the tests' client of an agent's REST API (IPA's
// v1, which our agent serves too): a command posted as Ironic posts it,
// with or without waiting, and the command list Ironic polls. It speaks
// the API and judges nothing beyond HTTP, so tests can check refusals
// (a wrong token's 401) with the same client.
package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Client calls one agent.
type Client struct {
	// Base is the API's root: http://127.0.0.1:9999 or https://...
	Base string
	// Token is the agent token the calls carry as Ironic's do (the
	// agent_token query parameter); "" sends none.
	Token string
	// HTTP is the client to use (one that trusts the agent's
	// certificate, for TLS); nil: http.DefaultClient.
	HTTP *http.Client
	// NoTokenOnList sends no token on GET /v1/commands/, as Ironic
	// before 29 polls.
	NoTokenOnList bool
}

// Reply is the agent's answer to one command (IPA's CommandResult), with
// the HTTP status and the body as read.
type Reply struct {
	HTTPStatus int             `json:"-"`
	Body       []byte          `json:"-"`
	ID         string          `json:"id"`
	Name       string          `json:"command_name"`
	Status     string          `json:"command_status"`
	Error      json.RawMessage `json:"command_error"`
	Result     json.RawMessage `json:"command_result"`
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// commandsURL is /v1/commands/ with wait (when set) and the token, in
// Ironic's order; a list (no wait) carries no token with NoTokenOnList.
func (c *Client) commandsURL(wait *bool) string {
	u, sep := c.Base+"/v1/commands/", "?"
	if wait != nil {
		u += sep + "wait=" + strconv.FormatBool(*wait)
		sep = "&"
	}
	if c.Token != "" && (wait != nil || !c.NoTokenOnList) {
		u += sep + "agent_token=" + url.QueryEscape(c.Token)
	}
	return u
}

// Post sends command name with params (nil: {}), waiting for it to end
// when wait is set (?wait=true; else ?wait=false), and returns the reply
// whatever its HTTP status. The error is for the exchange only.
func (c *Client) Post(ctx context.Context, name string, params any, wait bool) (*Reply, error) {
	if params == nil {
		params = map[string]any{}
	}
	body, err := json.Marshal(map[string]any{"name": name, "params": params})
	if err != nil {
		return nil, err
	}
	return c.PostDocument(ctx, body, wait)
}

// PostDocument sends body, a whole command document ({"name": ...,
// "params": ...}, such as one recorded from Ironic), as Post does.
func (c *Client) PostDocument(ctx context.Context, body []byte, wait bool) (*Reply, error) {
	var doc struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Name == "" {
		return nil, fmt.Errorf("the command document %.200q has no name (%v)", body, err)
	}
	name := doc.Name
	req, err := http.NewRequestWithContext(ctx, "POST", c.commandsURL(&wait), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the reply: %w", name, err)
	}
	r := &Reply{HTTPStatus: resp.StatusCode, Body: data}
	if resp.StatusCode == http.StatusOK {
		_ = json.Unmarshal(data, r)
	}
	return r, nil
}

// Run posts command name, waits for it, and returns its command_result;
// an HTTP error or a command that did not succeed is an error.
func (c *Client) Run(ctx context.Context, name string, params any) (json.RawMessage, error) {
	r, err := c.Post(ctx, name, params, true)
	if err != nil {
		return nil, err
	}
	if r.HTTPStatus != http.StatusOK || r.Status == "" {
		return nil, fmt.Errorf("%s: HTTP %d: %s", name, r.HTTPStatus, r.Body)
	}
	if r.Status != "SUCCEEDED" {
		return nil, fmt.Errorf("%s: %s: %s", name, r.Status, r.Error)
	}
	return r.Result, nil
}

// List is GET /v1/commands/: the HTTP status, and the commands when it
// is 200.
func (c *Client) List(ctx context.Context) (int, []Reply, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.commandsURL(nil), nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, nil
	}
	var list struct {
		Commands []Reply `json:"commands"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("GET /v1/commands/: %w", err)
	}
	return resp.StatusCode, list.Commands, nil
}

// WaitDone polls List every interval, as Ironic's conductor does over
// heartbeats or its command_wait_interval, until the last command named
// name (the command_name: "install_bootloader") has ended, and returns
// it; it fails when List does or ctx ends first.
func (c *Client) WaitDone(ctx context.Context, name string, interval time.Duration) (*Reply, error) {
	for {
		code, cmds, err := c.List(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s did not end: %w", name, ctx.Err())
		}
		if err != nil {
			return nil, fmt.Errorf("waiting for %s: %w", name, err)
		}
		if code != http.StatusOK {
			return nil, fmt.Errorf("waiting for %s: GET /v1/commands/: HTTP %d", name, code)
		}
		for i := len(cmds) - 1; i >= 0; i-- {
			if cmds[i].Name == name {
				if cmds[i].Status != "RUNNING" {
					return &cmds[i], nil
				}
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s did not end: %w", name, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// WaitReady polls List every interval until it answers 200, ctx ends, or
// gone (when set) says the agent is gone (its VM exited).
func (c *Client) WaitReady(ctx context.Context, interval time.Duration, gone func() bool) error {
	for {
		if code, _, err := c.List(ctx); err == nil && code == http.StatusOK {
			return nil
		}
		if gone != nil && gone() {
			return fmt.Errorf("the agent at %s is gone before its API answered", c.Base)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the agent API at %s did not answer: %w", c.Base, ctx.Err())
		case <-time.After(interval):
		}
	}
}
