package ironic

import (
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/fakeironic"
)

// FuzzParseLookup feeds arbitrary lookup replies: a reply is either
// accepted with a node UUID and a positive heartbeat_timeout, or refused
// with an error, never a panic.
func FuzzParseLookup(f *testing.F) {
	for _, name := range []string{"lookup.json", "lookup-masked.json", "lookup-404.json", "root.json"} {
		if b, err := fakeironic.Recorded(name); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{`{"node": {"uuid": "x"}, "heartbeat_timeout": 300}`, `{"node": {"uuid": 1}}`, `{"node": null, "config": []}`,
		`{"node": {"uuid": "u"}, "config": {"heartbeat_timeout": "NaN"}}`, `{"node": {"uuid": "u"}, "config": {"heartbeat_timeout": -1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := ParseLookup(b, "fuzz")
		if err != nil {
			return
		}
		if res.NodeUUID == "" || !(res.Config.HeartbeatTimeout > 0) {
			t.Fatalf("accepted a reply without node uuid or heartbeat_timeout: %+v", res)
		}
	})
}

// FuzzErrorText: any error body gives some text, never a panic.
func FuzzErrorText(f *testing.F) {
	for _, name := range []string{"heartbeat-wrong-token.json", "lookup-404.json"} {
		if b, err := fakeironic.Recorded(name); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{`{"error_message": {"faultstring": 3}}`, `{"error_message": "not json"}`, `{"title": 1}`, `[]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = ErrorText(b)
	})
}
