package collector

import (
	"fmt"
	"io"

	"github.com/ironic-go/ironic-agent/inventory"
)

// WriteTable prints a short human-readable summary of inv.
func WriteTable(w io.Writer, inv *inventory.Inventory) error {
	_, err := fmt.Fprintf(w, "Hostname: %s\nBoot:     %s\n", inv.Hostname, inv.Boot.CurrentBootMode)
	return err
}
