// Package collector reads the machine below one root directory (sysfs,
// procfs, udev data, SMBIOS tables, netlink) and builds the IPA-format
// inventory. The root is "/" in production and a fixtures/<machine> tree in
// tests, so the same code runs against recorded machines.
//
// The inventory is built by named units (cpu, memory, interfaces, lldp,
// system_vendor, boot, hostname, disks, bmc), like node_exporter's collectors
// and IPA's inspection collectors: a unit that fails leaves its fields null
// and logs one warning naming the file and the reason; the other units still
// run, and Collect itself fails only when its context ends. More units,
// pci_devices, numa_topology, usb_devices and extra_hardware, read what
// IPA's inspection collectors of those names report beside the inventory
// (PCIDevices, ReadNUMATopology, USBDevices, ExtraHardware; DMIDecode
// needs no unit of its own).
//
// Two emulations live in their own packages: internal/dmidecode writes the
// SMBIOS table as dmidecode's text and parses it as IPA does, and
// internal/udev derives from sysfs what udev's rules (scsi_id, ata_id,
// usb_id, path_id, kpartx_id) would have stored for a disk.
package collector

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/ironic-go/ironic-agent/bmc"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/inventory"
)

// Options selects the root directory and the optional, slower parts.
type Options struct {
	// Root is the directory the machine is read below; "" means "/".
	// Netlink, ethtool and uname are asked only when Root is "/"; a fixture
	// tree carries their answers in files (see netrecord.go).
	Root string
	// Logger receives one warning per unreadable or garbled source.
	Logger *slog.Logger
	// CollectLLDP fills interfaces[].lldp by listening on every NIC.
	CollectLLDP bool
	// LLDPTimeout bounds the LLDP capture (IPA's ipa-lldp-timeout).
	LLDPTimeout time.Duration
	// LLDP captures the frames when CollectLLDP is set (package lldp
	// provides it). When nil, lldp stays null and a warning says why.
	LLDP LLDPCapturer
	// SkipBMC leaves bmc_address and bmc_v6address null and bmc_mac out
	// (lookup's agent_skip_bmc_detect).
	SkipBMC bool
	// IPMI answers the BMC queries; nil means the IPMI device itself on a
	// live root. Tests and fixtures pass a bmc.Replay of ipmi.json.
	IPMI bmc.Transport
	// IgnoreUdev makes the disk collector derive every value from sysfs even
	// when /run/udev/data and /dev/disk/by-path exist below Root (the
	// ramdisk's own view, and the check that both routes agree).
	IgnoreUdev bool
	// trace, when set, records every path read (capture-fixture).
	trace *tracer
}

// LLDPCapturer listens for one LLDP frame on each named interface and
// returns the raw TLVs per interface name; an interface that heard nothing
// before timeout maps to an empty, non-nil list (IPA reports []).
type LLDPCapturer interface {
	Capture(ctx context.Context, interfaces []string, timeout time.Duration) (map[string][]inventory.LLDPTLV, error)
}

func (o Options) root() string {
	if o.Root == "" {
		return "/"
	}
	return o.Root
}

func (o Options) logger() *slog.Logger {
	return logging.OrDiscard(o.Logger)
}

// fs returns the file reader for the root. Every reader uses it (never
// os.ReadFile on an absolute path) so capture-fixture sees what was read.
func (o Options) fs() rootFS { return newRootFS(o.root(), o.trace) }

// collection is the state of one Collect: the inventory being filled and the
// sources shared between units (the SMBIOS table is decoded once).
type collection struct {
	opts Options
	fs   rootFS
	log  *slog.Logger
	inv  *inventory.Inventory

	smbiosDone bool
	smbios     *smbiosInfo
	smbiosErr  error

	// net is what netlink and ethtool say (live root) or what the capture
	// recorded (fixture root); see netrecord.go.
	net *netRecord

	// memBlocks, when not nil, delivers the memory blocks' count that
	// prefetchMemoryBlocks started reading.
	memBlocks <-chan blockCount

	// lldp is what the lldp unit heard on each candidate NIC, nil when it
	// did not run or failed; the interfaces unit puts it in place.
	lldp map[string][]inventory.LLDPTLV
}

// unit is one named part of the inventory.
type unit struct {
	name string
	run  func(ctx context.Context, c *collection) error
}

// units lists the parts of the inventory in IPA's order. A unit writes only
// its own fields; on error those stay as the unit left them (null). LLDP
// is captured before the NICs are read, as IPA's list_network_interfaces
// does: the capture waits up to ipa-lldp-timeout, and the carrier and
// addresses read after it are those of links that had that long to come
// up (read before, a NIC just brought up reported no carrier yet).
func units() []unit {
	return []unit{
		{"lldp", collectLLDP},
		{"interfaces", collectInterfaces},
		{"cpu", collectCPU},
		{"disks", collectDisks},
		{"memory", collectMemory},
		{"bmc", collectBMC},
		{"system_vendor", collectSystemVendor},
		{"boot", collectBoot},
		{"hostname", collectHostname},
	}
}

// inspectionUnits read what IPA's pci-devices, numa-topology, usb-devices
// and extra-hardware inspection collectors report beside the inventory.
// The inventory document has no such fields, so Collect does not run them
// (package agent/inspect calls PCIDevices, ReadNUMATopology, USBDevices
// and ExtraHardware when Ironic asks for those collectors); Capture runs them so a fixture
// tree answers them as the machine did. dmi-decode needs no unit: the
// inventory's units read the SMBIOS table.
func inspectionUnits() []unit {
	return []unit{
		{"pci_devices", collectPCIDevices},
		{"numa_topology", collectNUMATopology},
		{"usb_devices", collectUSBDevices},
		{"extra_hardware", collectExtraHardware},
	}
}

// Collect builds the inventory of the machine below opts.Root.
func Collect(ctx context.Context, opts Options) (*inventory.Inventory, error) {
	c, err := collect(ctx, opts, units())
	if err != nil {
		return nil, err
	}
	return c.inv, nil
}

// collect runs the given units and returns the whole collection, whose
// recorded netlink facts capture-fixture also needs.
func collect(ctx context.Context, opts Options, parts []unit) (*collection, error) {
	c := &collection{
		opts: opts,
		fs:   opts.fs(),
		log:  opts.logger(),
		inv:  newInventory(),
	}
	if slices.ContainsFunc(parts, func(u unit) bool { return u.name == "memory" }) {
		c.prefetchMemoryBlocks()
	}
	for _, u := range parts {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("inventory: %w", err)
		}
		if err := runUnit(ctx, c, u); err != nil {
			// One warning per problem: a unit that worked around several
			// bad files returns them joined.
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range j.Unwrap() {
					c.warn(u.name, e)
				}
			} else {
				c.warn(u.name, err)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	return c, nil
}

// newInventory returns an inventory whose lists are empty rather than null,
// as IPA's are.
func newInventory() *inventory.Inventory {
	return &inventory.Inventory{
		Interfaces: []inventory.Interface{},
		Disks:      []inventory.Disk{},
		CPU:        inventory.CPU{Flags: []string{}},
		Boot:       inventory.Boot{CurrentBootMode: "bios"},
	}
}

// runUnit runs one unit and turns a panic into its error: a garbled input
// that trips a bug in one reader must not take the whole inventory down.
// The warning stays one line; the stack, for whoever fixes the reader, is
// logged at debug level.
func runUnit(ctx context.Context, c *collection, u unit) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Debug("inventory unit panicked", "unit", u.name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return u.run(ctx, c)
}

// collectDisks fills disks[] (disks.go).
func collectDisks(ctx context.Context, c *collection) error {
	disks, err := Disks(ctx, c.opts)
	if err != nil {
		return err
	}
	c.inv.Disks = disks
	return nil
}

// warn logs one problem with a source that a unit worked around.
func (c *collection) warn(unit string, err error) {
	c.log.Warn("inventory source unusable; the fields it feeds are null or come from a fallback", "unit", unit, "error", err)
}
