package fakeironic

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Every document the server answers with is embedded and is JSON.
func TestRecorded(t *testing.T) {
	for _, name := range []string{"root.json", "lookup.json", "lookup-404.json", "lookup-masked.json",
		"heartbeat-wrong-token.json", "get_clean_steps.request.json"} {
		b, err := Recorded(name)
		if err != nil || !json.Valid(b) {
			t.Errorf("%s: %v, valid JSON %v", name, err, json.Valid(b))
		}
	}
	if _, err := Recorded("nope.json"); err == nil || !strings.Contains(err.Error(), `"nope.json"`) {
		t.Errorf("an unknown document: %v", err)
	}
}

// send sends a request as the agent does, with the API version header,
// and returns the status and body.
func send(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(versionHeader, "1.68")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// get GETs url and decodes the document.
func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	code, b := send(t, "GET", url, "")
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v: %s", url, err, b)
	}
	return code, doc
}

func TestLookupAndHeartbeat(t *testing.T) {
	f := &Server{NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Token: "tok", HeartbeatTimeout: 30,
		Node: map[string]any{"properties": map[string]any{}}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	if code, doc := get(t, srv.URL+"/"); code != 200 || doc["default_version"] == nil {
		t.Errorf("GET / = %d %v", code, doc)
	}
	// Without the version header, Ironic knows no lookup.
	if resp, err := http.Get(srv.URL + "/v1/lookup?addresses=52:54:00:00:00:01"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("lookup without a version: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	code, doc := get(t, srv.URL+"/v1/lookup?addresses=52:54:00:00:00:01")
	node, _ := doc["node"].(map[string]any)
	conf, _ := doc["config"].(map[string]any)
	if code != 200 || node["uuid"] != f.NodeUUID || conf["agent_token"] != "tok" || conf["heartbeat_timeout"] != 30.0 {
		t.Errorf("lookup = %d %v", code, doc)
	}
	if p, _ := node["properties"].(map[string]any); len(p) != 0 {
		t.Errorf("properties %v, want the override", p)
	}
	if b, _ := json.Marshal(node["links"]); !strings.Contains(string(b), f.NodeUUID) || strings.Contains(string(b), "ff890ff6") {
		t.Errorf("links %s", b)
	}
	if d, _ := node["driver_internal_info"].(map[string]any); d["agent_erase_devices_iterations"] != 1.0 {
		t.Errorf("driver_internal_info %v, want the recorded one", d)
	}
	post := func(token string) int {
		return heartbeat(t, srv.URL+"/v1/heartbeat/"+f.NodeUUID, `{"callback_url": "http://10.0.2.15:9999", "agent_token": "`+token+`"}`)
	}
	if c := post("wrong"); c != http.StatusBadRequest {
		t.Errorf("heartbeat with a wrong token: HTTP %d", c)
	}
	if c := post("tok"); c != http.StatusAccepted {
		t.Errorf("heartbeat: HTTP %d", c)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err := f.Wait(ctx, func(l []time.Time, h []Heartbeat) bool { return len(l) == 2 && len(h) == 1 })
	if err != nil {
		t.Fatal(err)
	}
	if h := f.Heartbeats(); h[0].Body["callback_url"] != "http://10.0.2.15:9999" {
		t.Errorf("heartbeat %+v", h)
	}
}

func TestUnknownNode(t *testing.T) {
	f := &Server{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	go func() {
		time.Sleep(50 * time.Millisecond)
		if resp, err := http.Get(srv.URL + "/v1/lookup"); err == nil {
			resp.Body.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := f.Wait(ctx, func(l []time.Time, _ []Heartbeat) bool { return len(l) > 0 }); err != nil {
		t.Fatal(err)
	}
	code, doc := get(t, srv.URL+"/v1/lookup")
	if code != http.StatusNotFound || !strings.Contains(doc["error_message"].(string), "could not be found") {
		t.Errorf("lookup of an unknown node = %d %v", code, doc)
	}
	if len(f.Lookups()) != 2 {
		t.Errorf("%d lookups recorded, want 2", len(f.Lookups()))
	}
}

// heartbeat posts body to url and returns the status.
func heartbeat(t *testing.T, url, body string) int {
	t.Helper()
	code, _ := send(t, "POST", url, body)
	return code
}

// The programmed answers: failing lookups first, the token masked after
// the first real lookup, a refused heartbeat, an API that is down, and
// every request recorded with its answer.
func TestProgrammedAnswers(t *testing.T) {
	var seen atomic.Int32
	f := &Server{NodeUUID: "u-1", Token: "tok", MaskToken: true, LookupFailures: []int{500, 409},
		CheckHeartbeat: func(body map[string]any) string {
			if body["callback_url"] != "https://a" {
				return "Detected change in ramdisk provided callback_url"
			}
			return ""
		},
		OnHeartbeat: func(Heartbeat) { seen.Add(1) }}
	srv := httptest.NewServer(f)
	defer srv.Close()
	var codes, tokens []string
	for range 4 {
		code, doc := get(t, srv.URL+"/v1/lookup")
		codes = append(codes, strconv.Itoa(code))
		if conf, ok := doc["config"].(map[string]any); ok {
			tokens = append(tokens, conf["agent_token"].(string))
		}
	}
	if strings.Join(codes, ",") != "500,409,200,200" || strings.Join(tokens, ",") != "tok,"+MaskedToken {
		t.Errorf("lookups answered %v with tokens %v", codes, tokens)
	}
	hb := srv.URL + "/v1/heartbeat/u-1"
	if c := heartbeat(t, hb, `{"agent_token": "tok", "callback_url": "https://b"}`); c != http.StatusBadRequest {
		t.Errorf("a refused heartbeat: HTTP %d", c)
	}
	if c := heartbeat(t, hb, `{"agent_token": "tok", "callback_url": "https://a"}`); c != http.StatusAccepted {
		t.Errorf("a heartbeat: HTTP %d", c)
	}
	f.SetDown(true)
	if c := heartbeat(t, hb, `{"agent_token": "tok", "callback_url": "https://a"}`); c != http.StatusServiceUnavailable {
		t.Errorf("a heartbeat while down: HTTP %d", c)
	}
	f.SetDown(false)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if r, err := f.First(ctx, "/v1/heartbeat/u-1"); err != nil || !strings.Contains(string(r.Body), "https://a") {
		t.Fatalf("the first accepted heartbeat: %+v, %v", r, err)
	}
	for seen.Load() != 1 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	if n := seen.Load(); n != 1 {
		t.Errorf("OnHeartbeat ran %d times, want once (for the accepted heartbeat)", n)
	}
	if h := f.Heartbeats(); len(h) != 1 || len(f.Requests()) != 7 {
		t.Errorf("%d heartbeats accepted of %d requests, want 1 of 7", len(h), len(f.Requests()))
	}
	if r := f.Requests()[0]; r.Version != "1.68" || r.URI != "/v1/lookup" || r.From != "127.0.0.1" || r.Status != 500 {
		t.Errorf("first request recorded as %+v", r)
	}
}

// The inspector's callback finds the node, or refuses data of an
// unknown machine.
func TestContinue(t *testing.T) {
	for _, f := range []*Server{{NodeUUID: "u-1"}, {}} {
		srv := httptest.NewServer(f)
		resp, err := http.Post(srv.URL+"/v1/continue", "application/json", strings.NewReader(`{"inventory": {}}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		want := http.StatusOK
		if f.NodeUUID == "" {
			want = http.StatusBadRequest
		}
		if resp.StatusCode != want || f.NodeUUID != "" && string(b) != `{"uuid": "u-1"}` {
			t.Errorf("node %q: HTTP %d %s", f.NodeUUID, resp.StatusCode, b)
		}
		if r := f.Requests(); len(r) != 1 || string(r[0].Body) != `{"inventory": {}}` {
			t.Errorf("recorded %+v", r)
		}
	}
}
