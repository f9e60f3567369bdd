package collector

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ironic-go/ironic-agent/inventory"
)

// WriteTable prints a summary of inv for a person: one line per subject,
// one row per disk and NIC. Unknown values print as "-".
func WriteTable(w io.Writer, inv *inventory.Inventory) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }

	sv := inv.SystemVendor
	p("System:\t%s\n", join(" ", orDash(sv.Manufacturer), orDash(sv.ProductName), "serial "+orDash(sv.SerialNumber)))
	p("Firmware:\t%s\n", join(" ", orDash(sv.Firmware.Vendor), orDash(sv.Firmware.Version), orDash(sv.Firmware.BuildDate)))
	c := inv.CPU
	freq := "-"
	if c.Frequency != "" {
		freq = c.Frequency + " MHz"
	}
	p("CPU:\t%d x %s, %s, %s, %d socket(s), %d flags\n", c.Count, orDash(c.ModelName), freq, orDash(c.Architecture), c.SocketCount, len(c.Flags))
	p("Memory:\t%s usable, %s installed\n", bytesOrDash(inv.Memory.Total), mibOrDash(inv.Memory.PhysicalMB))
	p("Boot:\t%s, PXE interface %s\n", inv.Boot.CurrentBootMode, dashIfNil(inv.Boot.PXEInterface))
	p("Hostname:\t%s\n", orDash(inv.Hostname))
	bmc := "BMC:\t" + join(" ", "IPv4 "+dashIfNil(inv.BMCAddress), "IPv6 "+dashIfNil(inv.BMCV6Address), "MAC "+dashIfNil(inv.BMCMAC))
	p("%s\n", bmc)
	if err := tw.Flush(); err != nil {
		return err
	}

	var disks [][]string
	for _, d := range inv.Disks {
		kind := "ssd"
		if d.Rotational {
			kind = "hdd"
		}
		if d.Tran != nil {
			kind += "/" + *d.Tran
		}
		disks = append(disks, []string{d.Name, humanBytes(d.Size), kind,
			dashIfNil(d.Model), dashIfNil(d.Serial), dashIfNil(d.WWN), dashIfNil(d.ByPath)})
	}
	if err := writeRows(w, "Disks", []string{"NAME", "SIZE", "TYPE", "MODEL", "SERIAL", "WWN", "BY-PATH"}, disks); err != nil {
		return err
	}

	var nics [][]string
	for _, i := range inv.Interfaces {
		carrier := "no"
		if i.HasCarrier {
			carrier = "yes"
		}
		speed := "-"
		if i.SpeedMbps != nil {
			speed = fmt.Sprintf("%d Mb/s", *i.SpeedMbps)
		}
		nics = append(nics, []string{i.Name, i.MACAddress, dashIfNil(i.IPv4Address),
			dashIfNil(i.IPv6Address), carrier, speed, dashIfNil(i.Driver), dashIfNil(i.PCIAddress)})
	}
	return writeRows(w, "Network interfaces", []string{"NAME", "MAC", "IPV4", "IPV6", "CARRIER", "SPEED", "DRIVER", "PCI"}, nics)
}

// writeRows prints a titled, aligned table; just the title when empty.
func writeRows(w io.Writer, title string, header []string, rows [][]string) error {
	fmt.Fprintf(w, "\n%s (%d):\n", title, len(rows))
	if len(rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range append([][]string{header}, rows...) {
		fmt.Fprintf(tw, "  %s\n", strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func dashIfNil(s *string) string {
	if s == nil {
		return "-"
	}
	return orDash(*s)
}

func join(sep string, parts ...string) string { return strings.Join(parts, sep) }

func bytesOrDash(b *int64) string {
	if b == nil {
		return "-"
	}
	return humanBytes(*b)
}

func mibOrDash(m *int64) string {
	if m == nil {
		return "-"
	}
	return humanBytes(*m << 20)
}

// humanBytes prints a size in binary units with one decimal, like lsblk.
func humanBytes(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	v, i := float64(b), 0
	for v >= unit && i < 6 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, " KMGTPE"[i])
}
