package api

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Ironic's polling must not flood the log: a successful GET is DEBUG, a
// POST INFO, a failure WARN, and the token never appears.
func TestRequestLogLevels(t *testing.T) {
	var buf bytes.Buffer
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	s := &Server{Log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	h := s.logRequests(ok)
	cases := []struct {
		method, target, want string
	}{
		{"GET", "/v1/commands/?agent_token=secret", "level=DEBUG"},
		{"POST", "/v1/commands/?agent_token=secret", "level=INFO"},
		{"GET", "/missing", "level=WARN"},
	}
	for _, c := range cases {
		buf.Reset()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(c.method, c.target, nil))
		line := buf.String()
		if !strings.HasPrefix(line, "time=") || !strings.Contains(line, c.want) || !strings.Contains(line, "method="+c.method) {
			t.Errorf("%s %s: logged %q, want %s", c.method, c.target, line, c.want)
		}
		if strings.Contains(line, "secret") {
			t.Errorf("%s %s: token logged: %q", c.method, c.target, line)
		}
	}
}

// http.ResponseController reaches the real writer through the recorder.
func TestStatusRecorderUnwrap(t *testing.T) {
	var flushErr error
	h := (&Server{}).logRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		flushErr = http.NewResponseController(w).Flush()
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if flushErr != nil {
		t.Errorf("Flush through the recorder: %v", flushErr)
	}
	if !rec.Flushed || rec.Code != http.StatusAccepted {
		t.Errorf("flushed %v code %d", rec.Flushed, rec.Code)
	}
}
