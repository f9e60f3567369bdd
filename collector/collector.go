// Package collector reads the machine below one root directory (sysfs,
// procfs, udev data, SMBIOS tables, netlink) and builds the IPA-format
// inventory. The root is "/" in production and a fixtures/<machine> tree in
// tests, so the same code runs against recorded machines.
package collector

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/inventory"
)

// Options selects the root directory and the optional, slower parts.
type Options struct {
	// Root is the directory the machine is read below; "" means "/".
	Root string
	// Logger receives one warning per unreadable or garbled source.
	Logger *slog.Logger
	// CollectLLDP fills interfaces[].lldp by listening on every NIC.
	CollectLLDP bool
	// LLDPTimeout bounds the LLDP capture (IPA's ipa-lldp-timeout).
	LLDPTimeout time.Duration
	// SkipBMC leaves bmc_address and bmc_v6address null (lookup's
	// agent_skip_bmc_detect).
	SkipBMC bool
	// IgnoreUdev makes the disk collector derive every value from sysfs even
	// when /run/udev/data and /dev/disk/by-path exist below Root (the
	// ramdisk's own view, and the check that both routes agree).
	IgnoreUdev bool
}

func (o Options) root() string {
	if o.Root == "" {
		return "/"
	}
	return o.Root
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// Collect builds the inventory of the machine below opts.Root.
func Collect(ctx context.Context, opts Options) (*inventory.Inventory, error) {
	root := opts.root()
	inv := &inventory.Inventory{
		Interfaces: []inventory.Interface{},
		Disks:      []inventory.Disk{},
		CPU:        inventory.CPU{Flags: []string{}},
	}
	disks, err := Disks(ctx, opts)
	if err != nil {
		return nil, err
	}
	inv.Disks = disks
	inv.Boot.CurrentBootMode = "bios"
	if fi, err := os.Stat(filepath.Join(root, "sys/firmware/efi")); err == nil && fi.IsDir() {
		inv.Boot.CurrentBootMode = "uefi"
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/hostname")); err == nil {
		inv.Hostname = strings.TrimSpace(string(b))
	}
	return inv, nil
}
