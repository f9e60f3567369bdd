package collector

import (
	"context"
	"fmt"
	"strings"

	"github.com/ironic-go/ironic-agent/inventory"
)

// collectBoot fills boot: the firmware mode and the raw BOOTIF parameter.
func collectBoot(ctx context.Context, c *collection) error {
	// IPA: "uefi" when /sys/firmware/efi is a directory, else "bios".
	c.inv.Boot.CurrentBootMode = "bios"
	if fi, err := c.fs.Stat("sys/firmware/efi"); err == nil && fi.IsDir() {
		c.inv.Boot.CurrentBootMode = "uefi"
	}
	b, err := c.fs.ReadFile("proc/cmdline")
	if err != nil {
		return fmt.Errorf("boot.pxe_interface: %w", err)
	}
	if v, ok := kernelParams(string(b))["BOOTIF"]; ok {
		// Reported raw (01-aa-bb-... or aa:bb:...), as IPA does.
		c.inv.Boot.PXEInterface = inventory.Ptr(v)
	}
	return nil
}

// kernelParams parses a kernel command line the way IPA does
// (utils._read_params_from_file), not the way the kernel does: split on
// white space, ignore tokens without "=", split at the first "=", no
// dequoting; a later duplicate wins.
func kernelParams(cmdline string) map[string]string {
	params := map[string]string{}
	for _, tok := range strings.Fields(cmdline) {
		k, v, ok := strings.Cut(tok, "=")
		if !ok {
			continue
		}
		params[k] = v
	}
	return params
}

// collectHostname fills hostname with the kernel's host name (IPA's
// socket.gethostname(), the UTS node name).
func collectHostname(ctx context.Context, c *collection) error {
	h, err := c.fs.ReadString("proc/sys/kernel/hostname")
	if err != nil {
		return err
	}
	c.inv.Hostname = h
	return nil
}
