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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// input is the part of the agent's step input this step uses.
type input struct {
	Node struct {
		UUID       string `json:"uuid"`
		Properties struct {
			RootDevice struct {
				Serial string `json:"serial"`
			} `json:"root_device"`
		} `json:"properties"`
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
	serial := in.Node.Properties.RootDevice.Serial
	if serial == "" || in.Node.UUID == "" {
		return errors.New("the node has no uuid or no properties.root_device.serial")
	}
	name, err := diskBySerial(sysBlock, serial)
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

// diskBySerial finds the block device whose serial is serial: virtio-blk
// and NVMe show it as text, SCSI and ATA disks in VPD page 0x80 (a 4-byte
// header, then the serial, maybe padded).
func diskBySerial(sysBlock, serial string) (string, error) {
	ents, err := os.ReadDir(sysBlock)
	if err != nil {
		return "", fmt.Errorf("list block devices: %w", err)
	}
	for _, e := range ents {
		d := filepath.Join(sysBlock, e.Name())
		for _, p := range []string{"serial", "device/serial"} {
			if b, err := os.ReadFile(filepath.Join(d, p)); err == nil && trim(b) == serial {
				return e.Name(), nil
			}
		}
		if b, err := os.ReadFile(filepath.Join(d, "device/vpd_pg80")); err == nil && len(b) > 4 && trim(b[4:]) == serial {
			return e.Name(), nil
		}
	}
	return "", fmt.Errorf("no block device in %s has serial %q", sysBlock, serial)
}

func trim(b []byte) string { return string(bytes.Trim(b, " \t\n\x00")) }
