// Package fakeironic is the one stand-in Ironic API of the test bed: it
// answers an agent's version request, lookup and heartbeats with the
// documents recorded from Debian's Ironic 21.4 (testdata/ironic-21.4,
// embedded so that guests, which run where the repository is not, carry
// them), with the node's UUID, token and heartbeat timeout of the test, and
// records every request. It also answers ironic-inspector's callback.
// Tests program it (failing lookups, masked tokens, refused heartbeats, an
// API that is down) and may put a conductor behind it (Cleaning) that
// drives the agent's REST API after each heartbeat, as Ironic's does.
// It imports nothing of the agent, so the agent's own tests can use it.
package fakeironic

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

//go:embed testdata/ironic-21.4
var recorded embed.FS

// Recorded returns the recorded Ironic 21.4 document name (lookup.json,
// lookup-masked.json, root.json, get_clean_steps.request.json, ...).
func Recorded(name string) ([]byte, error) {
	b, err := recorded.ReadFile("testdata/ironic-21.4/" + name)
	if err != nil {
		return nil, fmt.Errorf("fakeironic: no recorded document %q: %w", name, err)
	}
	return b, nil
}

// document is one of the embedded documents the server itself answers
// with; the package's test proves each exists.
func document(name string) []byte {
	b, _ := Recorded(name)
	return b
}

// MaskedToken is what Ironic answers in place of a token it issued before.
const MaskedToken = "******"

// versionHeader is the API microversion header; Ironic answers the
// ramdisk endpoints only to a request naming 1.22 or later.
const versionHeader = "X-OpenStack-Ironic-API-Version"

// Server is the fake Ironic; its zero value answers every lookup with
// Ironic's 404. Set its fields before it serves.
type Server struct {
	// NodeUUID is the node a lookup finds; "" finds none (404, as Ironic
	// answers an unknown machine).
	NodeUUID string
	// Token is the agent token the lookup hands out and the heartbeats
	// must carry ("" accepts any).
	Token string
	// MaskToken answers every lookup after the first with the token
	// masked, as Ironic does once it has issued one.
	MaskToken bool
	// HeartbeatTimeout is the lookup's heartbeat_timeout in seconds (the
	// agent heartbeats every third to half of it); 0 keeps the recorded
	// 10.
	HeartbeatTimeout int
	// Node replaces top-level fields of the recorded node document (its
	// properties, driver_internal_info, ...).
	Node map[string]any
	// LookupFailures are the HTTP statuses the first lookups get, with
	// Ironic's 404 document, before one finds the node.
	LookupFailures []int
	// CheckHeartbeat, when set, may refuse a heartbeat whose token is
	// good by returning the text of Ironic's 400 ("" accepts it).
	CheckHeartbeat func(body map[string]any) (refusal string)
	// OnHeartbeat, when set, runs in a goroutine of its own after each
	// accepted heartbeat, as Ironic's conductor acts on one.
	OnHeartbeat func(Heartbeat)

	mu       sync.Mutex
	requests []Request
	issued   bool // a lookup has handed the token out
	wiped    bool // the operation ended: no token is valid any more
	failed   int  // LookupFailures used
	down     bool
	changed  chan struct{}
}

// Request is one request the server answered.
type Request struct {
	At     time.Time
	Method string
	// URI is the path and query as sent, Path the path alone.
	URI, Path string
	// Version is the X-OpenStack-Ironic-API-Version header.
	Version string
	Header  http.Header
	Body    []byte
	// From is the client's address, without the port.
	From string
	// Status is the HTTP status the server answered.
	Status int
}

// Heartbeat is one heartbeat the server accepted.
type Heartbeat struct {
	At   time.Time
	Body map[string]any // callback_url, agent_version, agent_token, ...
}

// ServeHTTP answers GET /, GET /v1/lookup, POST /v1/heartbeat/{uuid} and
// ironic-inspector's POST /v1/continue.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	req := Request{At: time.Now(), Method: r.Method, URI: r.URL.RequestURI(), Path: r.URL.Path,
		Version: r.Header.Get(versionHeader), Header: r.Header.Clone(), Body: body}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		req.From = host
	}
	status, reply, onHeartbeat := s.answer(&req)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(reply)
	if onHeartbeat != nil {
		go onHeartbeat()
	}
}

// answer decides the reply to req and records req with its status, all
// under the lock, so a test waiting on the record sees the state the
// reply came from.
func (s *Server) answer(req *Request) (int, []byte, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	status, reply, after := s.route(req)
	req.Status = status
	s.requests = append(s.requests, *req)
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return status, reply, after
}

func (s *Server) route(req *Request) (int, []byte, func()) {
	switch {
	case s.down:
		return http.StatusServiceUnavailable, ErrorDocument("Service Unavailable"), nil
	case req.Method == http.MethodGet && req.Path == "/":
		return http.StatusOK, document("root.json"), nil
	case req.Method == http.MethodGet && req.Path == "/v1/lookup":
		return s.lookup(req)
	case req.Method == http.MethodPost && s.NodeUUID != "" && req.Path == "/v1/heartbeat/"+s.NodeUUID && req.Version != "":
		return s.heartbeat(req)
	case req.Method == http.MethodPost && req.Path == "/v1/continue":
		if s.NodeUUID == "" {
			// ironic-inspector refuses data of a machine it does not know.
			return http.StatusBadRequest, []byte(`{"error": {"message": "The following failures happened during running pre-processing hooks:\nLook up error: Could not find a node for attributes"}}`), nil
		}
		return http.StatusOK, fmt.Appendf(nil, `{"uuid": %q}`, s.NodeUUID), nil
	}
	return http.StatusNotFound, document("lookup-404.json"), nil
}

func (s *Server) lookup(req *Request) (int, []byte, func()) {
	if req.Version == "" || s.NodeUUID == "" {
		return http.StatusNotFound, document("lookup-404.json"), nil
	}
	if s.failed < len(s.LookupFailures) {
		s.failed++
		return s.LookupFailures[s.failed-1], document("lookup-404.json"), nil
	}
	token := s.Token
	if s.MaskToken && s.issued {
		token = MaskedToken
	}
	b, err := s.lookupDocument(token)
	if err != nil {
		return http.StatusInternalServerError, ErrorDocument(err.Error()), nil
	}
	s.issued = true
	return http.StatusOK, b, nil
}

func (s *Server) heartbeat(req *Request) (int, []byte, func()) {
	var body map[string]any
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return http.StatusBadRequest, ErrorDocument("Invalid heartbeat body: " + err.Error()), nil
	}
	if tok, _ := body["agent_token"].(string); s.wiped || s.Token != "" && tok != s.Token {
		return http.StatusBadRequest, document("heartbeat-wrong-token.json"), nil
	}
	if s.CheckHeartbeat != nil {
		if refusal := s.CheckHeartbeat(body); refusal != "" {
			return http.StatusBadRequest, ErrorDocument(refusal), nil
		}
	}
	var after func()
	if s.OnHeartbeat != nil {
		hb := Heartbeat{At: req.At, Body: body}
		after = func() { s.OnHeartbeat(hb) }
	}
	return http.StatusAccepted, nil, after
}

// ErrorDocument is Ironic's error body: the fault, JSON-encoded, as a
// string in error_message.
func ErrorDocument(text string) []byte {
	inner, _ := json.Marshal(map[string]any{"faultcode": "Client", "faultstring": text, "debuginfo": nil})
	b, _ := json.Marshal(map[string]string{"error_message": string(inner)})
	return b
}

// lookupDocument is the recorded lookup document for this node.
func (s *Server) lookupDocument(token string) ([]byte, error) {
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
	doc.Config["agent_token"] = token
	if s.HeartbeatTimeout > 0 {
		doc.Config["heartbeat_timeout"] = s.HeartbeatTimeout
	}
	return json.Marshal(doc)
}

// SetDown makes the API answer 503 to everything (Ironic stopped behind
// its proxy) until SetDown(false).
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// wipeToken ends the operation: as Ironic, which forgets the token then,
// the server refuses every later heartbeat.
func (s *Server) wipeToken() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wiped = true
}

// Requests are the requests so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Lookups are the times of the lookups so far.
func (s *Server) Lookups() []time.Time {
	return lookups(s.Requests())
}

// Heartbeats are the accepted heartbeats so far.
func (s *Server) Heartbeats() []Heartbeat {
	return heartbeats(s.Requests())
}

func lookups(reqs []Request) []time.Time {
	var out []time.Time
	for _, r := range reqs {
		if r.Path == "/v1/lookup" {
			out = append(out, r.At)
		}
	}
	return out
}

func heartbeats(reqs []Request) []Heartbeat {
	var out []Heartbeat
	for _, r := range reqs {
		if strings.HasPrefix(r.Path, "/v1/heartbeat/") && r.Status == http.StatusAccepted {
			var body map[string]any
			_ = json.Unmarshal(r.Body, &body)
			out = append(out, Heartbeat{At: r.At, Body: body})
		}
	}
	return out
}

// WaitRequests waits until done, given the requests so far, says yes, or
// ctx ends.
func (s *Server) WaitRequests(ctx context.Context, done func([]Request) bool) error {
	for {
		s.mu.Lock()
		ok := done(s.requests)
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

// Wait waits until done, given the lookups and accepted heartbeats so far,
// says yes, or ctx ends.
func (s *Server) Wait(ctx context.Context, done func(lookups []time.Time, heartbeats []Heartbeat) bool) error {
	return s.WaitRequests(ctx, func(reqs []Request) bool { return done(lookups(reqs), heartbeats(reqs)) })
}

// First waits for the first request to path that the server accepted
// (a 2xx answer) and returns it.
func (s *Server) First(ctx context.Context, path string) (Request, error) {
	var found Request
	err := s.WaitRequests(ctx, func(reqs []Request) bool {
		for _, r := range reqs {
			if r.Path == path && r.Status >= 200 && r.Status < 300 {
				found = r
				return true
			}
		}
		return false
	})
	return found, err
}
