package agentclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeAgent answers as an agent with token "tok": a command named "fail"
// fails, any other succeeds with its params as the result.
func fakeAgent(t *testing.T, ready *atomic.Bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/commands/" {
			http.NotFound(w, r)
			return
		}
		if ready != nil && !ready.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Query().Get("agent_token") != "tok" {
			http.Error(w, `{"faultstring": "unauthorized"}`, http.StatusUnauthorized)
			return
		}
		if r.Method == "GET" {
			_, _ = w.Write([]byte(`{"commands": [{"id": "1", "command_name": "a", "command_status": "SUCCEEDED"}]}`))
			return
		}
		var in struct {
			Name   string
			Params json.RawMessage
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		status, errDoc := "SUCCEEDED", "null"
		if in.Name == "fail" {
			status, errDoc = "FAILED", `{"message": "it failed"}`
		}
		if r.URL.Query().Get("wait") != "true" {
			status = "RUNNING"
		}
		_, _ = w.Write([]byte(`{"id": "2", "command_name": "` + in.Name + `", "command_status": "` + status +
			`", "command_error": ` + errDoc + `, "command_result": ` + string(in.Params) + `}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRun(t *testing.T) {
	srv := fakeAgent(t, nil)
	c := &Client{Base: srv.URL, Token: "tok"}
	res, err := c.Run(t.Context(), "x.y", map[string]any{"k": 1})
	if err != nil || string(res) != `{"k":1}` {
		t.Errorf("Run = %s, %v", res, err)
	}
	if _, err := c.Run(t.Context(), "fail", nil); err == nil || !strings.Contains(err.Error(), "FAILED") {
		t.Errorf("a failed command: %v", err)
	}
	bad := &Client{Base: srv.URL, Token: "wrong"}
	if _, err := bad.Run(t.Context(), "x.y", nil); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("a wrong token: %v", err)
	}
}

func TestPost(t *testing.T) {
	srv := fakeAgent(t, nil)
	r, err := (&Client{Base: srv.URL, Token: "tok"}).Post(t.Context(), "standby.power_off", nil, false)
	if err != nil || r.HTTPStatus != 200 || r.Status != "RUNNING" || r.Name != "standby.power_off" || r.ID != "2" {
		t.Errorf("Post = %+v, %v", r, err)
	}
	r, err = (&Client{Base: srv.URL}).Post(t.Context(), "x", nil, true)
	if err != nil || r.HTTPStatus != http.StatusUnauthorized || r.Status != "" || !strings.Contains(string(r.Body), "unauthorized") {
		t.Errorf("Post without a token = %+v, %v", r, err)
	}
}

func TestCommandsURL(t *testing.T) {
	yes := true
	for _, c := range []struct {
		c    Client
		wait *bool
		want string
	}{
		{Client{Base: "http://a:1"}, nil, "http://a:1/v1/commands/"},
		{Client{Base: "http://a:1", Token: "t&k"}, nil, "http://a:1/v1/commands/?agent_token=t%26k"},
		{Client{Base: "http://a:1", Token: "tok"}, &yes, "http://a:1/v1/commands/?wait=true&agent_token=tok"},
		{Client{Base: "http://a:1", Token: "tok", NoTokenOnList: true}, nil, "http://a:1/v1/commands/"},
		{Client{Base: "http://a:1", Token: "tok", NoTokenOnList: true}, &yes, "http://a:1/v1/commands/?wait=true&agent_token=tok"},
	} {
		if got := c.c.commandsURL(c.wait); got != c.want {
			t.Errorf("commandsURL = %s, want %s", got, c.want)
		}
	}
}

func TestListAndWaitReady(t *testing.T) {
	var ready atomic.Bool
	srv := fakeAgent(t, &ready)
	c := &Client{Base: srv.URL, Token: "tok"}
	if code, _, err := c.List(t.Context()); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("List before ready = %d, %v", code, err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		ready.Store(true)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx, 20*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	code, cmds, err := c.List(t.Context())
	if err != nil || code != 200 || len(cmds) != 1 || cmds[0].Name != "a" {
		t.Errorf("List = %d %+v %v", code, cmds, err)
	}
	gone := &Client{Base: srv.URL, Token: "wrong"}
	if err := gone.WaitReady(ctx, 20*time.Millisecond, func() bool { return true }); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("WaitReady of a gone agent: %v", err)
	}
}

func TestPostDocument(t *testing.T) {
	srv := fakeAgent(t, nil)
	c := &Client{Base: srv.URL, Token: "tok"}
	r, err := c.PostDocument(t.Context(), []byte(`{"name": "deploy.x", "params": {"recorded": true}}`), true)
	if err != nil || r.Status != "SUCCEEDED" || string(r.Result) != `{"recorded": true}` {
		t.Errorf("PostDocument = %+v, %v", r, err)
	}
	if _, err := c.PostDocument(t.Context(), []byte(`{"params": {}}`), true); err == nil || !strings.Contains(err.Error(), "has no name") {
		t.Errorf("a document without a name: %v", err)
	}
}

// WaitDone polls until the last command of the name has ended; an
// earlier one of the same name that ended does not count.
func TestWaitDone(t *testing.T) {
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		last := "RUNNING"
		if polls.Add(1) >= 3 {
			last = "FAILED"
		}
		_, _ = w.Write([]byte(`{"commands": [{"command_name": "a", "command_status": "SUCCEEDED"},
			{"command_name": "b", "command_status": "SUCCEEDED"}, {"command_name": "a", "command_status": "` + last + `"}]}`))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c := &Client{Base: srv.URL}
	r, err := c.WaitDone(ctx, "a", time.Millisecond)
	if err != nil || r.Status != "FAILED" || polls.Load() != 3 {
		t.Errorf("WaitDone = %+v, %v after %d polls", r, err, polls.Load())
	}
	short, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	polls.Store(-1000)
	if _, err := c.WaitDone(short, "a", time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not end") {
		t.Errorf("WaitDone of a command that runs on: %v", err)
	}
}
