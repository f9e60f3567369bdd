package collector

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
)

// PCIDevice is one entry of the inspection data's "pci_devices" (IPA's
// pci-devices collector; the keys and their order are IPA's).
type PCIDevice struct {
	VendorID  string  `json:"vendor_id"`
	ProductID string  `json:"product_id"`
	Class     string  `json:"class"`
	Revision  *string `json:"revision"`
	Bus       string  `json:"bus"`
	// NUMANodeID is the device's numa_node file as the kernel wrote it
	// ("0", "1", or "-1" on a machine without NUMA), null when the file is
	// missing or unreadable. IPA 9.8 (2023.2) added the key and always
	// sends it; Ironic's pci-devices hook ignores it, so 2023.1 conductors
	// are unaffected.
	NUMANodeID *string `json:"numa_node_id"`
}

// PCIDevices lists sys/bus/pci/devices below opts.Root as IPA's
// pci-devices inspection collector does. A device whose vendor, device or
// class file cannot be read is skipped (IPA logs and skips it); a missing
// directory is an error naming it.
func PCIDevices(ctx context.Context, opts Options) ([]PCIDevice, error) {
	return pciDevices(ctx, opts.fs())
}

// collectPCIDevices is the pci_devices unit (see inspectionUnits).
func collectPCIDevices(ctx context.Context, c *collection) error {
	_, err := pciDevices(ctx, c.fs)
	return err
}

func pciDevices(ctx context.Context, f rootFS) ([]PCIDevice, error) {
	const dir = "sys/bus/pci/devices"
	ents, err := f.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := []PCIDevice{}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p := path.Join(dir, e.Name())
		if fi, err := f.Stat(p); err != nil || !fi.IsDir() {
			continue
		}
		v, err1 := hexID(f, path.Join(p, "vendor"))
		d, err2 := hexID(f, path.Join(p, "device"))
		c, err3 := hexID(f, path.Join(p, "class"))
		if err := errors.Join(err1, err2, err3); err != nil {
			continue
		}
		dev := PCIDevice{VendorID: v, ProductID: d, Class: c, Bus: e.Name()}
		if r, err := hexID(f, path.Join(p, "revision")); err == nil {
			dev.Revision = &r
		}
		// IPA keeps the text as it is (a string, not a number).
		if n, err := f.ReadString(path.Join(p, "numa_node")); err == nil {
			dev.NUMANodeID = &n
		}
		out = append(out, dev)
	}
	return out, nil
}

// hexID reads a sysfs id file ("0x8086\n") and returns what IPA's
// split('x')[1] does: the text between the first and any second 'x'.
func hexID(f rootFS, rel string) (string, error) {
	s, err := f.ReadString(rel)
	if err != nil {
		return "", err
	}
	_, after, ok := strings.Cut(s, "x")
	if !ok {
		return "", fmt.Errorf("%s: %q is not 0x-prefixed", f.Path(rel), s)
	}
	after, _, _ = strings.Cut(after, "x")
	return after, nil
}
