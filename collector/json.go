package collector

import (
	"encoding/json"
	"io"

	"github.com/ironic-go/ironic-agent/inventory"
)

// WriteJSON writes inv as indented JSON with a final newline: the output of
// `ironic-agent inventory` and the format of every fixture's
// inventory.json, so golden files diff cleanly.
func WriteJSON(w io.Writer, inv *inventory.Inventory) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(inv)
}
