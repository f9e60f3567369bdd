package collector

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
)

// PCIDevice is one entry of the inspection data's "pci_devices" (IPA's
// pci-devices collector; the keys and their order are IPA's). NUMANodeID
// is the device's numa_node file as IPA master (9.8 and later) reports it:
// the text, not a number ("-1" when the platform gives no node), null
// without the file.
type PCIDevice struct {
	VendorID   string  `json:"vendor_id"`
	ProductID  string  `json:"product_id"`
	Class      string  `json:"class"`
	Revision   *string `json:"revision"`
	Bus        string  `json:"bus"`
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
		if n, err := f.ReadString(path.Join(p, "numa_node")); err == nil {
			dev.NUMANodeID = &n
		}
		out = append(out, dev)
	}
	return out, nil
}

// hexID reads a sysfs id file ("0x8086\n") and returns the part after the
// 'x', as IPA does.
func hexID(f rootFS, rel string) (string, error) {
	s, err := f.ReadString(rel)
	if err != nil {
		return "", err
	}
	_, after, ok := strings.Cut(s, "x")
	if !ok {
		return "", fmt.Errorf("%s: %q is not 0x-prefixed", f.Path(rel), s)
	}
	return after, nil
}
