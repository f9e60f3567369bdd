// Package diskserial finds a guest's disk by its serial, as the root-device
// hint names it, for the executable steps the VM tests put into the
// ramdisk (internal/testbed/guest/installstep, fetchdirect).
package diskserial

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// RootHint is the part of a node (the agent's step input) that names
// its root disk: properties.root_device.serial.
type RootHint struct {
	Properties struct {
		RootDevice struct {
			Serial string `json:"serial"`
		} `json:"root_device"`
	} `json:"properties"`
}

// Serial is the root-device hint's serial, "" when there is none.
func (h RootHint) Serial() string { return h.Properties.RootDevice.Serial }

// Find returns the name (sdb, vda, nvme0n1) of the block device in
// sysBlock (/sys/block) whose serial is serial: virtio-blk and NVMe show
// it as text, SCSI and ATA disks in VPD page 0x80 (a 4-byte header, then
// the serial, maybe padded).
func Find(sysBlock, serial string) (string, error) {
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
