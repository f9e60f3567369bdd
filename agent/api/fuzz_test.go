package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/command"
)

// FuzzCommandBody drives POST /v1/commands/ with arbitrary bodies: the reply
// is always the result object or the JSON error envelope with a 4xx code,
// never a panic or a 5xx.
func FuzzCommandBody(f *testing.F) {
	for _, s := range []string{
		`{"name": "clean.get_clean_steps", "params": {"node": {"uuid": "x"}, "ports": []}}`,
		`{"name": "test.echo", "params": {"n": 1}}`,
		`{"name": "test.echo", "params": {"n": "x"}}`,
		`{"name": "test", "params": {}}`,
		`{"name": "", "params": {}}`,
		`{"name": null, "params": {}}`,
		`{"name": "a.b.c", "params": {"x": [1, {"y": null}]}}`,
		`{"name": "test.echo", "params": {}} trailing`,
		`[]`, `null`, `"x"`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	exts := map[string]command.Extension{
		"test": {"echo": {Bind: func(p command.Params) (command.Func, error) {
			var args struct {
				N int `json:"n"`
			}
			if err := p.Decode(&args); err != nil {
				return nil, err
			}
			return func(context.Context) (any, error) { return map[string]int{"n": args.N}, nil }, nil
		}}},
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ex := command.NewExecutor(context.Background(), exts, nil, nil)
		tokens := &Tokens{}
		tokens.SetToken(tok)
		h := (&Server{Exec: ex, Tokens: tokens}).Handler()
		req := httptest.NewRequest("POST", "/v1/commands/?wait=true&agent_token="+tok, bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("reply is not JSON: %q", rec.Body.String())
		}
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound:
		default:
			t.Fatalf("unexpected status %d: %s", rec.Code, rec.Body.String())
		}
		if name, params, err := DecodeCommandBody(body); err == nil && params == nil {
			t.Fatalf("decoded %q with nil params", name)
		}
	})
}
