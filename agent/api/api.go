// Package api serves the agent REST API Ironic drives (IPA's
// ironic_python_agent/api/app.py): the root and v1 documents, status, and
// /v1/commands for running and polling commands.
package api

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironic-go/ironic-agent/agent/command"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// maxBody bounds a command body. Ironic's largest bodies carry a config
// drive (IPA caps it at 64 MiB base64-gzipped) inside the node dict.
const maxBody = 128 << 20

// Tokens holds the agent token and applies IPA's checks.
//
// POST always needs the token (query parameter agent_token). GET is open
// until a GET presents a token (IPA 10.2..11.x behaviour): Ironic 21.4 polls
// GET /v1/commands/ without a token, newer Ironic sends it, and from the
// first GET that does, GETs without it are refused.
type Tokens struct {
	mu    sync.RWMutex
	token string
	// allowTokenless lets a POST without token through when the agent has
	// no token at all (standalone mode without a pre-shared token).
	allowTokenless bool
	getArmed       atomic.Bool
}

// RequireOnGet makes every GET of /v1/commands need the token from the
// start (IPA 12+), instead of arming on the first GET that presents one.
// Ironic before 2025.1 polls without a token: only for newer conductors.
func (t *Tokens) RequireOnGet() { t.getArmed.Store(true) }

// SetToken records the token. An empty string or the "******" mask never
// replaces a token already held.
func (t *Tokens) SetToken(tok string) {
	if tok == "" || tok == "******" {
		return
	}
	t.mu.Lock()
	t.token = tok
	t.mu.Unlock()
}

// Token returns the token held, "" if none.
func (t *Tokens) Token() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.token
}

// AllowTokenless lets POSTs without a token through while no token is held.
func (t *Tokens) AllowTokenless(b bool) {
	t.mu.Lock()
	t.allowTokenless = b
	t.mu.Unlock()
}

func (t *Tokens) checkPOST(given string, present bool) bool {
	t.mu.RLock()
	held, loose := t.token, t.allowTokenless
	t.mu.RUnlock()
	if held == "" {
		return loose && !present
	}
	return present && subtle.ConstantTimeCompare([]byte(given), []byte(held)) == 1
}

func (t *Tokens) checkGET(given string, present bool) bool {
	if !present {
		return !t.getArmed.Load()
	}
	held := t.Token()
	if held == "" || subtle.ConstantTimeCompare([]byte(given), []byte(held)) != 1 {
		return false
	}
	t.getArmed.Store(true)
	return true
}

// Server is the agent API.
type Server struct {
	Exec   *command.Executor
	Tokens *Tokens
	// Version is the agent version for /v1/status.
	Version string
	// StartedAt is when the agent's run loop started (zero: null).
	StartedAt func() time.Time
	Log       *slog.Logger
}

// Handler returns the HTTP handler with every route of IPA's API. Both
// /v1/commands and /v1/commands/ are answered directly (IPA redirects the
// first; Ironic uses the second).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.root)
	mux.HandleFunc("/v1", s.v1)
	mux.HandleFunc("/v1/{$}", s.v1)
	for _, p := range []string{"/v1/status", "/status", "/v1/status/{$}", "/status/{$}"} {
		mux.HandleFunc(p, s.status)
	}
	for _, p := range []string{"/v1/commands", "/v1/commands/{$}", "/commands", "/commands/{$}"} {
		mux.HandleFunc(p, s.commands)
	}
	for _, p := range []string{"/v1/commands/{id}", "/commands/{id}"} {
		mux.HandleFunc(p, s.command)
	}
	return s.logRequests(mux)
}

func (s *Server) log() *slog.Logger {
	return logging.OrDiscard(s.Log)
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (w *statusRecorder) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's writer (to
// flush or set deadlines) through the recorder.
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logRequests logs one line per request, like IPA's request_log, without
// the token. Ironic polls GET /v1/commands every few seconds while a step
// runs, so successful GETs are logged at DEBUG: at INFO they would flood the
// console and push everything else out of the log ring that
// collect_system_logs ships. Other methods stay at INFO, failures at WARN.
func (s *Server) logRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: 200}
		start := time.Now()
		h.ServeHTTP(rec, r)
		q := r.URL.Query()
		if q.Has("agent_token") {
			q.Set("agent_token", "***")
		}
		level := slog.LevelInfo
		switch {
		case rec.code >= 400:
			level = slog.LevelWarn
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			level = slog.LevelDebug
		}
		s.log().Log(r.Context(), level, "api request", "method", r.Method, "path", r.URL.Path, "query", q.Encode(),
			"status", rec.code, "remote", r.RemoteAddr, "duration", time.Since(start).Round(time.Microsecond))
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"faultcode": "Server", "faultstring": "cannot encode reply: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// writeFault writes IPA's error envelope. faultcode is "Server" for codes
// >= 500.
func writeFault(w http.ResponseWriter, code int, text string) {
	fc := "Client"
	if code >= 500 {
		fc = "Server"
	}
	writeJSON(w, code, map[string]string{"faultcode": fc, "faultstring": text})
}

func writeError(w http.ResponseWriter, err error) {
	e := ipaerror.As(err)
	code := e.Code
	if code < 400 || code > 599 {
		code = 500
	}
	writeFault(w, code, e.Error())
}

// Werkzeug's texts, which IPA returns for routing errors.
const (
	notFoundText   = "404 Not Found: The requested URL was not found on the server. If you entered the URL manually please check your spelling and try again."
	notAllowedText = "405 Method Not Allowed: The method is not allowed for the requested URL."
)

func methodAllowed(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m || (m == http.MethodGet && r.Method == http.MethodHead) {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(append(methods, "HEAD", "OPTIONS"), ", "))
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusOK)
		return false
	}
	writeFault(w, http.StatusMethodNotAllowed, notAllowedText)
	return false
}

func urlRoot(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

type link struct {
	Href string `json:"href"`
	Rel  string `json:"rel"`
	Type string `json:"type,omitempty"`
}

type versionDoc struct {
	ID    string `json:"id"`
	Links []link `json:"links"`
}

func v1Links(root string) []link {
	return []link{
		{Href: root + "/v1", Rel: "self"},
		{Href: "https://docs.openstack.org/ironic-python-agent/", Rel: "describedby", Type: "text/html"},
	}
}

func (s *Server) root(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		writeFault(w, http.StatusNotFound, notFoundText)
		return
	}
	if !methodAllowed(w, r, http.MethodGet) {
		return
	}
	v := versionDoc{ID: "v1", Links: v1Links(urlRoot(r))}
	writeJSON(w, http.StatusOK, struct {
		Name           string       `json:"name"`
		Description    string       `json:"description"`
		Versions       []versionDoc `json:"versions"`
		DefaultVersion versionDoc   `json:"default_version"`
	}{
		Name:           "OpenStack Ironic Python Agent API",
		Description:    "Ironic Python Agent is a provisioning agent for OpenStack Ironic",
		Versions:       []versionDoc{v},
		DefaultVersion: v,
	})
}

func (s *Server) v1(w http.ResponseWriter, r *http.Request) {
	if !methodAllowed(w, r, http.MethodGet) {
		return
	}
	root := urlRoot(r)
	type mediaType struct {
		Base string `json:"base"`
		Type string `json:"type"`
	}
	writeJSON(w, http.StatusOK, struct {
		ID         string      `json:"id"`
		Links      []link      `json:"links"`
		Commands   []link      `json:"commands"`
		Status     []link      `json:"status"`
		MediaTypes []mediaType `json:"media_types"`
	}{
		ID:    "v1",
		Links: v1Links(root),
		Commands: []link{
			{Href: root + "/v1/commands", Rel: "self"},
			{Href: root + "/commands", Rel: "bookmark"},
		},
		Status: []link{
			{Href: root + "/v1/status", Rel: "self"},
			{Href: root + "/status", Rel: "bookmark"},
		},
		MediaTypes: []mediaType{{Base: "application/json", Type: "application/vnd.openstack.ironic-python-agent.v1+json"}},
	})
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	if !methodAllowed(w, r, http.MethodGet) {
		return
	}
	var started *float64
	if s.StartedAt != nil {
		if t := s.StartedAt(); !t.IsZero() {
			f := float64(t.UnixNano()) / 1e9
			started = &f
		}
	}
	writeJSON(w, http.StatusOK, struct {
		StartedAt *float64 `json:"started_at"`
		Version   string   `json:"version"`
	}{started, s.Version})
}

func token(r *http.Request) (string, bool) {
	q := r.URL.Query()
	return q.Get("agent_token"), q.Has("agent_token")
}

func wantWait(r *http.Request) bool {
	return strings.EqualFold(r.URL.Query().Get("wait"), "true")
}

func (s *Server) unauthorized(w http.ResponseWriter) {
	writeFault(w, http.StatusUnauthorized, "401 Unauthorized: Token invalid.")
}

func (s *Server) commands(w http.ResponseWriter, r *http.Request) {
	if !methodAllowed(w, r, http.MethodGet, http.MethodPost) {
		return
	}
	if r.Method == http.MethodPost {
		s.run(w, r)
		return
	}
	if !s.Tokens.checkGET(token(r)) {
		s.unauthorized(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"commands": s.Exec.List()})
}

func (s *Server) command(w http.ResponseWriter, r *http.Request) {
	if !methodAllowed(w, r, http.MethodGet) {
		return
	}
	if !s.Tokens.checkGET(token(r)) {
		s.unauthorized(w)
		return
	}
	id := r.PathValue("id")
	res, ok := s.Exec.Get(id)
	if !ok {
		writeError(w, ipaerror.NotFound("Command Result", id))
		return
	}
	if wantWait(r) {
		if err := res.Wait(r.Context()); err != nil {
			return // client went away
		}
	}
	writeJSON(w, http.StatusOK, res)
}

// commandBody is the POST body: {"name": "<ext>.<cmd>", "params": {...}}.
type commandBody struct {
	Name   *string         `json:"name"`
	Params json.RawMessage `json:"params"`
}

// DecodeCommandBody parses a POST /v1/commands body. It is the parser of
// outside bytes the fuzz test drives.
func DecodeCommandBody(b []byte) (string, command.Params, error) {
	var body commandBody
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&body); err != nil {
		return "", nil, errors.New("400 Bad Request: Failed to decode JSON object: " + err.Error())
	}
	if dec.More() {
		return "", nil, errors.New("400 Bad Request: Failed to decode JSON object: extra data after the object")
	}
	missing := errors.New("400 Bad Request: Missing or invalid name or params")
	if body.Name == nil || len(body.Params) == 0 {
		return "", nil, missing
	}
	var params command.Params
	if body.Params[0] != '{' {
		return "", nil, missing
	}
	if err := json.Unmarshal(body.Params, &params); err != nil {
		return "", nil, missing
	}
	if params == nil {
		params = command.Params{}
	}
	return *body.Name, params, nil
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	if !s.Tokens.checkPOST(token(r)) {
		s.unauthorized(w)
		return
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeFault(w, http.StatusBadRequest, "400 Bad Request: cannot read body: "+err.Error())
		return
	}
	name, params, err := DecodeCommandBody(b)
	if err != nil {
		writeFault(w, http.StatusBadRequest, err.Error())
		return
	}
	res, err := s.Exec.Execute(name, params)
	if err != nil {
		writeError(w, err)
		return
	}
	if wantWait(r) {
		if err := res.Wait(r.Context()); err != nil {
			return
		}
	}
	writeJSON(w, http.StatusOK, res)
}
