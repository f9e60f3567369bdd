package injectfiles

import (
	"encoding/json"
	"testing"
)

// FuzzParse: the files lists come from Ironic (node properties, deploy
// templates); no input may panic, and an accepted entry has a path that
// stays inside its filesystem.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`[{"path": "/etc/a", "content": "YQ==", "mode": 384}]`), []byte(`[{"path": "/b", "partition": "UUID=x", "deleted": true}]`))
	f.Add([]byte(`null`), []byte(`[{"path": "/etc/../../x", "partition": 1}]`))
	f.Add([]byte(`{}`), []byte(`[1, "x", null, {"owner": 1.5}]`))
	f.Fuzz(func(t *testing.T, props, args []byte) {
		files, err := Parse(json.RawMessage(props), json.RawMessage(args))
		if err != nil {
			return
		}
		for _, fl := range files {
			if fl.Path == "" || escapes(fl.Path) {
				t.Errorf("accepted %q", fl.Path)
			}
		}
	})
}

// FuzzFormatURL: a URL template from a deploy template never panics.
func FuzzFormatURL(f *testing.F) {
	f.Add("http://x/{node[uuid]}/{ports[0][address]}/{{}}")
	f.Add("{node[properties][a][0]}{")
	f.Fuzz(func(t *testing.T, tmpl string) {
		node := map[string]any{"uuid": "u", "properties": map[string]any{"a": []any{1.0, "b"}}}
		ports := []any{map[string]any{"address": "aa"}}
		_, _ = FormatURL(tmpl, node, ports)
	})
}
