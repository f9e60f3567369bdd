package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ironic-go/ironic-agent/agent/command"
)

const tok = "tiFtwpghhKF8HV0FrSMOh3aAsw31mpadirCo2f7hKu0"

type testServer struct {
	*httptest.Server
	release chan struct{}
	exec    *command.Executor
}

func newTestServer(t *testing.T, token string) *testServer {
	t.Helper()
	s, release, ex := newTestAPI(t, token)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &testServer{Server: srv, release: release, exec: ex}
}

// newTestAPI is the Server of newTestServer without a listener, with the
// channel that lets its test.async command finish. Its clean-up releases
// the command and waits for it.
func newTestAPI(t *testing.T, token string) (*Server, chan struct{}, *command.Executor) {
	t.Helper()
	release := make(chan struct{})
	exts := map[string]command.Extension{
		"test": {
			"sync": {Bind: func(command.Params) (command.Func, error) {
				return func(context.Context) (any, error) { return "done", nil }, nil
			}},
			"fail": {Bind: func(command.Params) (command.Func, error) {
				return func(context.Context) (any, error) { return nil, errors.New("disk /dev/loop9 exploded") }, nil
			}},
			"async": {Async: true, Bind: func(command.Params) (command.Func, error) {
				return func(ctx context.Context) (any, error) {
					select {
					case <-release:
					case <-ctx.Done():
					}
					return "finished", nil
				}, nil
			}},
			"bad": {Bind: func(p command.Params) (command.Func, error) {
				var args struct {
					N int `json:"n"`
				}
				if err := p.Decode(&args); err != nil {
					return nil, err
				}
				return func(context.Context) (any, error) { return args.N, nil }, nil
			}},
			"panics": {Bind: func(command.Params) (command.Func, error) {
				return func(context.Context) (any, error) { panic("boom") }, nil
			}},
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	ex := command.NewExecutor(ctx, exts, nil, nil)
	tokens := &Tokens{}
	tokens.SetToken(token)
	s := &Server{Exec: ex, Tokens: tokens, Version: "0.1.0", StartedAt: func() time.Time { return time.Unix(1700000000, 500000000) }}
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		cancel()
		ex.Wait()
	})
	return s, release, ex
}

func do(t *testing.T, method, url, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func post(t *testing.T, ts *testServer, query, name string, params string) (int, string) {
	t.Helper()
	code, _, body := do(t, "POST", ts.URL+"/v1/commands/?agent_token="+tok+query, `{"name": "`+name+`", "params": `+params+`}`)
	return code, body
}

func fault(t *testing.T, body string) (string, string) {
	t.Helper()
	var f struct {
		Code   string `json:"faultcode"`
		String string `json:"faultstring"`
	}
	if err := json.Unmarshal([]byte(body), &f); err != nil {
		t.Fatalf("error body %q is not the JSON envelope: %v", body, err)
	}
	return f.Code, f.String
}

func TestRoutes(t *testing.T) {
	ts := newTestServer(t, tok)
	for _, p := range []string{"/", "/v1", "/v1/", "/v1/status", "/status", "/v1/commands", "/v1/commands/", "/commands", "/commands/"} {
		code, h, body := do(t, "GET", ts.URL+p, "")
		if code != 200 || h.Get("Content-Type") != "application/json" || !json.Valid([]byte(body)) {
			t.Errorf("GET %s: %d %s %s", p, code, h.Get("Content-Type"), body)
		}
	}
	_, _, body := do(t, "GET", ts.URL+"/v1/status", "")
	if body != `{"started_at":1700000000.5,"version":"0.1.0"}` {
		t.Errorf("status %s", body)
	}
	_, _, body = do(t, "GET", ts.URL+"/", "")
	if !strings.Contains(body, `"href":"`+ts.URL+`/v1","rel":"self"`) || !strings.Contains(body, `"name":"OpenStack Ironic Python Agent API"`) {
		t.Errorf("root %s", body)
	}
	_, _, body = do(t, "GET", ts.URL+"/v1/", "")
	if !strings.Contains(body, `"commands":[{"href":"`+ts.URL+`/v1/commands","rel":"self"},{"href":"`+ts.URL+`/commands","rel":"bookmark"}]`) ||
		!strings.Contains(body, `application/vnd.openstack.ironic-python-agent.v1+json`) {
		t.Errorf("v1 %s", body)
	}

	code, _, body := do(t, "GET", ts.URL+"/v2/nothing", "")
	fc, fs := fault(t, body)
	if code != 404 || fc != "Client" || !strings.HasPrefix(fs, "404 Not Found") {
		t.Errorf("unknown path: %d %s", code, body)
	}
	code, h, body := do(t, "PUT", ts.URL+"/v1/commands/", "")
	_, fs = fault(t, body)
	if code != 405 || !strings.HasPrefix(fs, "405 Method Not Allowed") || !strings.Contains(h.Get("Allow"), "POST") {
		t.Errorf("PUT: %d %s %v", code, body, h)
	}
	code, _, body = do(t, "GET", ts.URL+"/v1/commands/nope", "")
	_, fs = fault(t, body)
	if code != 404 || fs != "Not found: Command Result with id nope not found." {
		t.Errorf("unknown id: %d %s", code, body)
	}
}

func TestPostToken(t *testing.T) {
	ts := newTestServer(t, tok)
	body := `{"name": "test.sync", "params": {}}`
	for _, q := range []string{"", "?agent_token=", "?agent_token=wrong"} {
		code, _, b := do(t, "POST", ts.URL+"/v1/commands/"+q, body)
		fc, fs := fault(t, b)
		if code != 401 || fc != "Client" || fs != "401 Unauthorized: Token invalid." {
			t.Errorf("POST %q: %d %s", q, code, b)
		}
	}
	if len(ts.exec.List()) != 0 {
		t.Errorf("refused commands were recorded")
	}
	if code, b := post(t, ts, "&wait=true", "test.sync", "{}"); code != 200 {
		t.Errorf("with token: %d %s", code, b)
	}

	// An agent without a token refuses every POST unless told otherwise
	// (standalone).
	ts2 := newTestServer(t, "")
	if code, _, _ := do(t, "POST", ts2.URL+"/v1/commands/", body); code != 401 {
		t.Errorf("no token held: %d", code)
	}
}

// Ironic 21.4 polls without a token; from the first GET that presents one,
// GETs need it (IPA 10.2 behaviour, protocol pitfall 1).
func TestGetTokenArming(t *testing.T) {
	ts := newTestServer(t, tok)
	steps := []struct {
		query string
		want  int
	}{
		{"", 200},
		{"?agent_token=wrong", 401},
		{"", 200}, // a wrong token does not arm
		{"?agent_token=" + tok, 200},
		{"", 401},
		{"?agent_token=" + tok, 200},
	}
	for i, s := range steps {
		code, _, b := do(t, "GET", ts.URL+"/v1/commands/"+s.query, "")
		if code != s.want {
			t.Errorf("step %d GET %q: %d %s, want %d", i, s.query, code, b, s.want)
		}
	}
}

// agent_token_on_get=required: IPA 12's rule, GETs need the token from
// the start.
func TestGetTokenRequired(t *testing.T) {
	srv := &Server{Exec: command.NewExecutor(t.Context(), nil, nil, nil), Tokens: &Tokens{}}
	srv.Tokens.SetToken(tok)
	srv.Tokens.RequireOnGet()
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	for _, s := range []struct {
		query string
		want  int
	}{{"", 401}, {"?agent_token=wrong", 401}, {"?agent_token=" + tok, 200}, {"", 401}} {
		if code, _, b := do(t, "GET", ts.URL+"/v1/commands/"+s.query, ""); code != s.want {
			t.Errorf("GET %q: %d %s, want %d", s.query, code, b, s.want)
		}
	}
}

func TestBodyErrors(t *testing.T) {
	ts := newTestServer(t, tok)
	cases := []struct {
		body  string
		code  int
		fault string
	}{
		{`not json`, 400, "400 Bad Request: Failed to decode JSON object"},
		{`{"params": {}}`, 400, "400 Bad Request: Missing or invalid name or params"},
		{`{"name": "test.sync"}`, 400, "400 Bad Request: Missing or invalid name or params"},
		{`{"name": "test.sync", "params": []}`, 400, "400 Bad Request: Missing or invalid name or params"},
		{`{"name": "test.sync", "params": null}`, 400, "400 Bad Request: Missing or invalid name or params"},
		{`{"name": "sync", "params": {}}`, 400, "Invalid command: Command name must be of the form <extension>.<name>"},
		{`{"name": "nope.sync", "params": {}}`, 404, "Not found: Extension with id nope not found."},
		{`{"name": "test.nope", "params": {}}`, 400, "Invalid command: Unknown command: nope"},
		{`{"name": "test.bad", "params": {"n": "x"}}`, 400, "Invalid command parameters: parameter n: want int, got JSON string"},
	}
	for _, c := range cases {
		code, _, b := do(t, "POST", ts.URL+"/v1/commands?agent_token="+tok, c.body)
		_, fs := fault(t, b)
		if code != c.code || !strings.HasPrefix(fs, c.fault) {
			t.Errorf("%s: %d %q, want %d %q", c.body, code, fs, c.code, c.fault)
		}
	}
	if n := len(ts.exec.List()); n != 0 {
		t.Errorf("%d rejected commands were recorded", n)
	}
}

func TestResultObject(t *testing.T) {
	ts := newTestServer(t, tok)
	code, b := post(t, ts, "&wait=true", "test.sync", "{}")
	if code != 200 {
		t.Fatal(code, b)
	}
	// Field order and string wrapping of a sync command.
	var m map[string]json.RawMessage
	_ = json.Unmarshal([]byte(b), &m)
	want := `{"id":` + string(m["id"]) + `,"command_name":"sync","command_status":"SUCCEEDED","command_error":null,"command_result":{"result":"done"}}`
	if b != want {
		t.Errorf("result\n got %s\nwant %s", b, want)
	}

	_, b = post(t, ts, "", "test.fail", "{}")
	if !strings.Contains(b, `"command_status":"FAILED","command_error":{"type":"CommandExecutionError","code":500,"message":"Command execution failed","details":"disk /dev/loop9 exploded"},"command_result":null`) {
		t.Errorf("failed command %s", b)
	}
	_, b = post(t, ts, "", "test.panics", "{}")
	if !strings.Contains(b, `"command_status":"FAILED"`) || !strings.Contains(b, "internal error: boom") {
		t.Errorf("panicking command %s", b)
	}
	// The list stays serialisable after failures.
	code, _, b = do(t, "GET", ts.URL+"/v1/commands/", "")
	var list struct {
		Commands []map[string]any `json:"commands"`
	}
	if code != 200 || json.Unmarshal([]byte(b), &list) != nil || len(list.Commands) != 3 {
		t.Errorf("list %d %s", code, b)
	}
}

func TestAsyncBusyWait(t *testing.T) {
	ts := newTestServer(t, tok)
	code, b := post(t, ts, "&wait=false", "test.async", "{}")
	if code != 200 || !strings.Contains(b, `"command_name":"async","command_status":"RUNNING","command_error":null,"command_result":null`) {
		t.Fatalf("async start: %d %s", code, b)
	}
	var first struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(b), &first)

	code, b = post(t, ts, "", "test.sync", "{}")
	_, fs := fault(t, b)
	if code != 409 || fs != "Agent is busy: executing command async" {
		t.Errorf("busy: %d %s", code, b)
	}
	if n := len(ts.exec.List()); n != 1 {
		t.Errorf("busy refusal recorded: %d results", n)
	}

	// That wait=true blocks while the command runs is TestWaitTrueBlocks;
	// here it is the way to learn over HTTP that the command has finished.
	close(ts.release)
	_, _, body := do(t, "GET", ts.URL+"/v1/commands/"+first.ID+"?wait=TRUE", "")
	if !strings.Contains(body, `"command_status":"SUCCEEDED","command_error":null,"command_result":{"result":"async: finished"}`) {
		t.Errorf("after wait: %s", body)
	}
	if code, b := post(t, ts, "&wait=true", "test.sync", "{}"); code != 200 || !strings.Contains(b, "SUCCEEDED") {
		t.Errorf("after the async command: %d %s", code, b)
	}
}

// TestWaitTrueBlocks: GET /v1/commands/{id}?wait=true answers only once
// the command has finished, with its result. It runs in a synctest bubble:
// synctest.Wait returns when every goroutine of the bubble is durably
// blocked, so "the request has not been answered" is checked at a moment
// the handler can no longer progress on its own, not after a guessed delay.
func TestWaitTrueBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, release, ex := newTestAPI(t, tok)
		h := s.Handler()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/commands/?wait=false&agent_token="+tok,
			strings.NewReader(`{"name": "test.async", "params": {}}`)))
		var started struct {
			ID string `json:"id"`
		}
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &started) != nil || started.ID == "" {
			t.Fatalf("async start: %d %s", rec.Code, rec.Body)
		}
		res, ok := ex.Get(started.ID)
		if !ok {
			t.Fatalf("command %s is not in the list", started.ID)
		}

		waitRec := httptest.NewRecorder()
		answered := make(chan struct{})
		go func() {
			defer close(answered)
			h.ServeHTTP(waitRec, httptest.NewRequest("GET", "/v1/commands/"+started.ID+"?wait=TRUE", nil))
		}()
		synctest.Wait()
		select {
		case <-answered:
			t.Fatalf("wait=true answered while the command was running: %d %s", waitRec.Code, waitRec.Body)
		default:
		}
		if st, _, _ := res.Snapshot(); st != command.Running {
			t.Fatalf("command status %s while its work is held, want %s", st, command.Running)
		}

		close(release)
		<-answered
		if body := waitRec.Body.String(); waitRec.Code != 200 ||
			!strings.Contains(body, `"command_status":"SUCCEEDED","command_error":null,"command_result":{"result":"async: finished"}`) {
			t.Errorf("after wait: %d %s", waitRec.Code, body)
		}
	})
}
