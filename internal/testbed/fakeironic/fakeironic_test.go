package fakeironic

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// The embedded documents are the agent's recordings, byte for byte.
func TestDocumentsAreTheRecordings(t *testing.T) {
	ents, err := recorded.ReadDir("testdata/ironic-21.4")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		want, err := os.ReadFile("../../../agent/testdata/ironic-21.4/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(document(e.Name()), want) {
			t.Errorf("testdata/ironic-21.4/%s differs from agent/testdata/ironic-21.4's", e.Name())
		}
	}
}

func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v: %s", url, err, b)
	}
	return resp.StatusCode, doc
}

func TestLookupAndHeartbeat(t *testing.T) {
	f := &Server{NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Token: "tok", HeartbeatTimeout: 30,
		Node: map[string]any{"properties": map[string]any{}}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	if code, doc := get(t, srv.URL+"/"); code != 200 || doc["default_version"] == nil {
		t.Errorf("GET / = %d %v", code, doc)
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
		resp, err := http.Post(srv.URL+"/v1/heartbeat/"+f.NodeUUID, "application/json",
			strings.NewReader(`{"callback_url": "http://10.0.2.15:9999", "agent_token": "`+token+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post("wrong"); c != http.StatusUnauthorized {
		t.Errorf("heartbeat with a wrong token: HTTP %d", c)
	}
	if c := post("tok"); c != http.StatusAccepted {
		t.Errorf("heartbeat: HTTP %d", c)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err := f.Wait(ctx, func(l []time.Time, h []Heartbeat) bool { return len(l) == 1 && len(h) == 1 })
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
