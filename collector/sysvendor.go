package collector

import (
	"context"
	"errors"
	"io/fs"
)

// collectSystemVendor fills system_vendor from SMBIOS types 1 (system) and
// 0 (BIOS), as lshw does for IPA, falling back to the kernel's
// /sys/class/dmi/id copies when the raw table is missing or unreadable (it
// is readable by root only). Unknown values are "", IPA's rule.
func collectSystemVendor(ctx context.Context, c *collection) error {
	sv := &c.inv.SystemVendor
	si, err := c.smbiosTable()
	if err != nil {
		c.warn("system_vendor", err)
	}
	if si != nil {
		if s, ok := si.first(1); ok {
			sv.Manufacturer = s.str(0x04)
			sv.ProductName = s.str(0x05)
			sv.SerialNumber = s.str(0x07)
			// lshw appends a non-empty SKU number: "PowerEdge R640 (SKU=...)".
			if len(s.Formatted) >= 0x1b {
				if sku := s.str(0x19); sku != "" {
					sv.ProductName += " (" + sku + ")"
				}
			}
		}
		if s, ok := si.first(0); ok {
			sv.Firmware.Vendor = s.str(0x04)
			sv.Firmware.Version = s.str(0x05)
			sv.Firmware.BuildDate = s.str(0x08)
		}
		if _, ok := si.first(1); ok {
			return nil
		}
	}
	// No usable table: the kernel's decoded copies.
	var errs []error
	read := func(name string) string {
		v, err := c.fs.ReadString("sys/class/dmi/id/" + name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		return v
	}
	sv.Manufacturer = read("sys_vendor")
	sv.ProductName = read("product_name")
	sv.SerialNumber = read("product_serial")
	if sku := read("product_sku"); sku != "" && sv.ProductName != "" {
		sv.ProductName += " (" + sku + ")"
	}
	sv.Firmware.Vendor = read("bios_vendor")
	sv.Firmware.Version = read("bios_version")
	sv.Firmware.BuildDate = read("bios_date")
	return errors.Join(errs...)
}
