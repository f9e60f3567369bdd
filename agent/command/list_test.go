package command

import (
	"encoding/json"
	"testing"
)

// A fresh agent's command list must encode as [] (Ironic 21.4 iterates it
// after an agent restart and fails the node on null).
func TestListOfFreshExecutorIsEmptyArray(t *testing.T) {
	e := NewExecutor(t.Context(), nil, nil, nil)
	b, err := json.Marshal(map[string]any{"commands": e.List()})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"commands":[]}` {
		t.Errorf("fresh command list encodes as %s, want {\"commands\":[]}", b)
	}
}
