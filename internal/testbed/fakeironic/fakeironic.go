// Package fakeironic is the one stand-in Ironic API of the test bed: it
// answers an agent's version request, lookup and heartbeats with the
// documents recorded from Debian's Ironic 21.4 (agent/testdata/ironic-21.4,
// copied here so that guests, which run where the repository is not, carry
// them), with the node's UUID, token and heartbeat timeout of the test, and
// records what the agent sent. It drives nothing: a test calls the agent's
// own API (internal/testbed/agentclient) for the steps.
package fakeironic

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sync"
	"time"
)

//go:embed testdata/ironic-21.4
var recorded embed.FS

func document(name string) []byte {
	b, err := recorded.ReadFile("testdata/ironic-21.4/" + name)
	if err != nil {
		panic("fakeironic: " + err.Error())
	}
	return b
}

// Server is the fake Ironic; its zero value answers every lookup with
// Ironic's 404.
type Server struct {
	// NodeUUID is the node a lookup finds; "" finds none (404, as Ironic
	// answers an unknown machine).
	NodeUUID string
	// Token is the agent token the lookup hands out and the heartbeats
	// must carry ("" accepts any).
	Token string
	// HeartbeatTimeout is the lookup's heartbeat_timeout in seconds (the
	// agent heartbeats every third to half of it); 0 keeps the recorded
	// 10.
	HeartbeatTimeout int
	// Node replaces top-level fields of the recorded node document (its
	// properties, driver_internal_info, ...).
	Node map[string]any

	mu         sync.Mutex
	lookups    []time.Time
	heartbeats []Heartbeat
	changed    chan struct{}
}

// Heartbeat is one heartbeat the agent sent.
type Heartbeat struct {
	At   time.Time
	Body map[string]any // callback_url, agent_version, agent_token, ...
}

// ServeHTTP answers GET /, GET /v1/lookup and POST /v1/heartbeat/{uuid}.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/":
		_, _ = w.Write(document("root.json"))
	case r.Method == http.MethodGet && r.URL.Path == "/v1/lookup":
		s.note(func() { s.lookups = append(s.lookups, time.Now()) })
		if s.NodeUUID == "" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write(document("lookup-404.json"))
			return
		}
		b, err := s.lookup()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(b)
	case r.Method == http.MethodPost && s.NodeUUID != "" && r.URL.Path == "/v1/heartbeat/"+s.NodeUUID:
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		if tok, _ := body["agent_token"].(string); s.Token != "" && tok != s.Token {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write(document("heartbeat-wrong-token.json"))
			return
		}
		s.note(func() { s.heartbeats = append(s.heartbeats, Heartbeat{At: time.Now(), Body: body}) })
		w.WriteHeader(http.StatusAccepted)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write(document("lookup-404.json"))
	}
}

// lookup is the recorded lookup document for this node.
func (s *Server) lookup() ([]byte, error) {
	var doc struct {
		Node   map[string]any `json:"node"`
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal(document("lookup.json"), &doc); err != nil {
		return nil, fmt.Errorf("fakeironic: lookup.json: %w", err)
	}
	rec, _ := doc.Node["uuid"].(string)
	// The links name the recorded node: point them at this one.
	links, err := json.Marshal(doc.Node["links"])
	if err != nil {
		return nil, err
	}
	var relinked any
	_ = json.Unmarshal(bytes.ReplaceAll(links, []byte(rec), []byte(s.NodeUUID)), &relinked)
	doc.Node["links"] = relinked
	doc.Node["uuid"] = s.NodeUUID
	maps.Copy(doc.Node, s.Node)
	doc.Config["agent_token"] = s.Token
	if s.HeartbeatTimeout > 0 {
		doc.Config["heartbeat_timeout"] = s.HeartbeatTimeout
	}
	return json.Marshal(doc)
}

func (s *Server) note(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// Lookups are the times of the lookups so far.
func (s *Server) Lookups() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.lookups...)
}

// Heartbeats are the heartbeats so far.
func (s *Server) Heartbeats() []Heartbeat {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Heartbeat(nil), s.heartbeats...)
}

// Wait waits until done, called under the server's lock with the lookups
// and heartbeats so far, says yes, or ctx ends.
func (s *Server) Wait(ctx context.Context, done func(lookups []time.Time, heartbeats []Heartbeat) bool) error {
	for {
		s.mu.Lock()
		ok := done(s.lookups, s.heartbeats)
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("fakeironic: %w", ctx.Err())
		}
	}
}
