package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/collector"
	"github.com/ironic-go/ironic-agent/internal/devmapper"
	"github.com/ironic-go/ironic-agent/internal/efivar"
	"github.com/ironic-go/ironic-agent/internal/logging"
)

// The views of the log bundle an operator reads besides the logs, each
// built from the kernel's interfaces and the agent's own collectors
// instead of IPA's programs (lsblk, efibootmgr, multipath, ip route);
// IPA's entry names where it has the view.

// initLog is the init's own log from its first line (package rdinit
// writes it).
func (a *Agent) initLog() ([]byte, error) {
	path := a.opts.InitLog
	if path == "" {
		path = logging.InitLogFile
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: none: the agent was not started by the ramdisk's init", path)
	}
	return b, err
}

// blockPieces are "lsblk" (every block device, partitions included) and
// "udev/<name>" for each device (the properties udev's rules would have
// stored, as JSON, IPA's entries of the same names).
func (a *Agent) blockPieces(ctx context.Context) []logPiece {
	views, err := collector.BlockViews(ctx, collector.Options{Root: a.inventoryRoot(), Logger: a.log})
	if err != nil {
		return []logPiece{{"lsblk", func(context.Context) ([]byte, error) { return nil, err }}}
	}
	pieces := []logPiece{{"lsblk", func(context.Context) ([]byte, error) { return lsblkView(views), nil }}}
	for _, v := range views {
		pieces = append(pieces, logPiece{"udev/" + v.Name, func(context.Context) ([]byte, error) {
			b, err := json.MarshalIndent(v.Udev, "", "  ")
			return append(b, '\n'), err
		}})
	}
	return pieces
}

// inventoryRoot is the root the collectors read ("/" on a machine).
func (a *Agent) inventoryRoot() string {
	if a.cfg != nil && a.cfg.InventoryRoot != "" {
		return a.cfg.InventoryRoot
	}
	return "/"
}

// lsblkView is a table of the block devices, as `lsblk --all` lists them
// with the columns that say what is where.
func lsblkView(views []collector.BlockView) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%-12s %-8s %-7s %15s %2s %2s %-10s %10s %-24s %-20s %-18s %s\n",
		"NAME", "MAJ:MIN", "TYPE", "SIZE", "RO", "RM", "PARENT", "START", "MODEL", "SERIAL", "WWN", "HOLDERS")
	flag := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return strings.ReplaceAll(s, " ", "_")
	}
	for _, v := range views {
		start := "-"
		if v.Type == "part" {
			start = fmt.Sprint(v.Start)
		}
		fmt.Fprintf(&b, "%-12s %-8s %-7s %15d %2s %2s %-10s %10s %-24s %-20s %-18s %s\n",
			v.Name, v.MajMin, v.Type, v.Size, flag(v.RO), flag(v.RM), dash(v.Parent), start,
			dash(v.Udev["ID_MODEL"]), dash(v.Udev["ID_SERIAL_SHORT"]), dash(v.Udev["ID_WWN"]), dash(strings.Join(v.Holders, ",")))
	}
	if len(views) == 0 {
		b.WriteString("(no block devices)\n")
	}
	return b.Bytes()
}

// bootEntries lists the UEFI boot entries as `efibootmgr -v` does:
// BootCurrent, BootOrder, then each Boot#### with its device path.
func (a *Agent) bootEntries() ([]byte, error) {
	st := a.efivars()
	if fi, err := os.Stat(st.Dir); err != nil || !fi.IsDir() {
		return fmt.Appendf(nil, "no UEFI variables (%s is missing): the machine did not boot in UEFI mode, or efivarfs is not mounted\n", st.Dir), nil
	}
	var b bytes.Buffer
	if _, cur, err := st.Get("BootCurrent"); err == nil && len(cur) == 2 {
		fmt.Fprintf(&b, "BootCurrent: %04X\n", binary.LittleEndian.Uint16(cur))
	}
	order, err := st.BootOrder()
	if err != nil {
		fmt.Fprintf(&b, "BootOrder: (%v)\n", err)
	} else {
		var ns []string
		for _, n := range order {
			ns = append(ns, fmt.Sprintf("%04X", n))
		}
		fmt.Fprintf(&b, "BootOrder: %s\n", strings.Join(ns, ","))
	}
	entries, err := st.BootEntries()
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Err != nil {
			fmt.Fprintf(&b, "%s (unreadable: %v)\n", efivar.BootName(e.Num), e.Err)
			continue
		}
		active := " "
		if e.Option.Attributes&1 != 0 { // LOAD_OPTION_ACTIVE
			active = "*"
		}
		fmt.Fprintf(&b, "%s%s %s\t%s\n", efivar.BootName(e.Num), active, e.Option.Description, e.Option.FilePath)
	}
	if len(entries) == 0 {
		b.WriteString("(no boot entries)\n")
	}
	return b.Bytes(), nil
}

// multipathMaps lists the device-mapper multipath maps with their tables
// and path states (what `multipath -ll` shows), read from sysfs and the
// DM ioctls.
func (a *Agent) multipathMaps() ([]byte, error) {
	sys := filepath.Join(a.inventoryRoot(), "sys/block")
	ents, err := os.ReadDir(sys)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	var ctl *devmapper.Control
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "dm-") {
			continue
		}
		dir := filepath.Join(sys, e.Name(), "dm")
		uuid, _ := os.ReadFile(filepath.Join(dir, "uuid"))
		if !strings.HasPrefix(string(uuid), "mpath-") {
			continue
		}
		name, _ := os.ReadFile(filepath.Join(dir, "name"))
		n := strings.TrimSpace(string(name))
		slaves, _ := os.ReadDir(filepath.Join(sys, e.Name(), "slaves"))
		var paths []string
		for _, s := range slaves {
			paths = append(paths, s.Name())
		}
		fmt.Fprintf(&b, "%s (%s) %s paths %s\n", n, strings.TrimPrefix(strings.TrimSpace(string(uuid)), "mpath-"), e.Name(), strings.Join(paths, ","))
		if ctl == nil {
			if ctl, err = devmapper.Open(); err != nil {
				fmt.Fprintf(&b, "  (table and status: %v)\n", err)
				continue
			}
			defer ctl.Close()
		}
		for _, table := range []bool{true, false} {
			what := map[bool]string{true: "table", false: "status"}[table]
			ts, err := ctl.Status(n, table)
			if err != nil {
				fmt.Fprintf(&b, "  %s: %v\n", what, err)
				continue
			}
			for _, t := range ts {
				fmt.Fprintf(&b, "  %s: %s\n", what, t)
			}
		}
	}
	if b.Len() == 0 {
		b.WriteString("(no multipath maps)\n")
	}
	return b.Bytes(), nil
}

// routes lists the IPv4 and IPv6 routes of every table, as `ip route
// show table all` and `ip -6 route show table all` do.
func routes() ([]byte, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	var b bytes.Buffer
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := netlink.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			fmt.Fprintf(&b, "(%s routes: %v)\n", map[int]string{netlink.FAMILY_V4: "IPv4", netlink.FAMILY_V6: "IPv6"}[fam], err)
			continue
		}
		slices.SortStableFunc(rs, func(x, y netlink.Route) int { return x.Table - y.Table })
		for _, r := range rs {
			b.WriteString(routeLine(r, names))
			b.WriteByte('\n')
		}
	}
	return b.Bytes(), nil
}

// routeLine is one route as `ip route` writes it.
func routeLine(r netlink.Route, names map[int]string) string {
	var f []string
	switch {
	case r.Type == unix.RTN_LOCAL:
		f = append(f, "local")
	case r.Type == unix.RTN_BROADCAST:
		f = append(f, "broadcast")
	case r.Type == unix.RTN_MULTICAST:
		f = append(f, "multicast")
	}
	if r.Dst == nil || r.Dst.IP.IsUnspecified() && isZeroMask(r.Dst.Mask) {
		f = append(f, "default")
	} else {
		f = append(f, r.Dst.String())
	}
	if r.Gw != nil {
		f = append(f, "via", r.Gw.String())
	}
	if n := names[r.LinkIndex]; n != "" {
		f = append(f, "dev", n)
	}
	if r.Table != unix.RT_TABLE_MAIN {
		f = append(f, "table", map[int]string{unix.RT_TABLE_LOCAL: "local"}[r.Table])
		if r.Table != unix.RT_TABLE_LOCAL {
			f[len(f)-1] = fmt.Sprint(r.Table)
		}
	}
	f = append(f, "proto", r.Protocol.String(), "scope", r.Scope.String())
	if r.Src != nil {
		f = append(f, "src", r.Src.String())
	}
	if r.Priority != 0 {
		f = append(f, "metric", fmt.Sprint(r.Priority))
	}
	return strings.Join(f, " ")
}

func isZeroMask(m net.IPMask) bool {
	ones, _ := m.Size()
	return ones == 0
}
