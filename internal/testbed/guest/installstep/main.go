// Command installstep is an executable deploy step in the shape of
// Metal3's install_coreos: the agent runs it from its steps directory
// when Ironic's custom-agent deploy interface asks for it. Instead of an
// operating system it writes a marker naming the node and the step's
// label argument to the start of the disk the node's root-device hint
// names by serial, so a test on the host can tell the step ran, got the
// node and its arguments, and wrote to the right disk only.
//
// It reads the agent's step input ({"step", "node", "ports", "args"}) on
// stdin and prints {"device": ..., "bytes": ...} as the step's result.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ironic-go/ironic-agent/internal/testbed/guest/diskserial"
)

// input is the part of the agent's step input this step uses.
type input struct {
	Node struct {
		UUID string `json:"uuid"`
		diskserial.RootHint
	} `json:"node"`
	Args struct {
		Label string `json:"label"`
	} `json:"args"`
}

func main() {
	if err := run(os.Stdin, os.Stdout, "/sys/block", "/dev"); err != nil {
		fmt.Fprintln(os.Stderr, "installstep:", err)
		os.Exit(1)
	}
}

// marker is what the step writes at the start of the disk.
func marker(node, label string) []byte {
	return fmt.Appendf(nil, "ironic-agent custom deploy step: node %s label %s\n", node, label)
}

func run(stdin io.Reader, stdout io.Writer, sysBlock, dev string) error {
	var in input
	if err := json.NewDecoder(stdin).Decode(&in); err != nil {
		return fmt.Errorf("read the step input on stdin: %w", err)
	}
	serial := in.Node.Serial()
	if serial == "" || in.Node.UUID == "" {
		return errors.New("the node has no uuid or no properties.root_device.serial")
	}
	name, err := diskserial.Find(sysBlock, serial)
	if err != nil {
		return err
	}
	path := filepath.Join(dev, name)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open the install disk: %w", err)
	}
	m := marker(in.Node.UUID, in.Args.Label)
	if _, err := f.WriteAt(m, 0); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	// The deploy ends with a power-off: the marker must be on the disk
	// before the step reports success.
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return json.NewEncoder(stdout).Encode(map[string]any{"device": path, "bytes": len(m)})
}
