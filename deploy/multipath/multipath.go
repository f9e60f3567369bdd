// Package multipath makes the device-mapper multipath maps of a machine
// whose disks are reached over several SCSI paths, as IPA gets them from
// multipathd and `multipath -ll` at start: one map per LUN, over every
// path to it, so the inventory, root-device hints, cleaning and a deploy
// see the LUN once. The maps are made from Go through the DM ioctls
// (internal/devmapper) with multipath-tools' defaults: the paths are the
// SCSI disks sharing a WWID (udev's ID_SERIAL), a map needs two of them
// (find_multipaths yes), it is named by its WWID (user_friendly_names no)
// with the DM UUID "mpath-<WWID>" that kpartx_id, lsblk and the inventory
// read, all paths in one priority group with the service-time selector
// (path_grouping_policy multibus), and no queueing when every path has
// failed (no_path_retry fail). There is no multipathd: Checker does its
// work that a ramdisk needs (checker.go): it checks every path of the
// maps every few seconds and fails or reinstates it, takes a path whose
// device is gone out of its map and adds one that appears later.
package multipath

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/devmapper"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/inventory"
)

// Map is a multipath map to make.
type Map struct {
	Name    string // the WWID (user_friendly_names no)
	UUID    string // "mpath-<WWID>"
	Sectors int64
	Paths   []inventory.MultipathPath
}

// The DM limits of a name (127 bytes) and a UUID (128).
const maxName, maxUUID = 127, 128

// Plan groups paths (collector.MultipathPaths, in device-number order)
// by WWID into maps. A WWID reached over one
// path gets no map, as with find_multipaths yes; nor does one whose paths
// are all held or one of whose paths a multipath map holds (its map
// exists already: Plan runs again whenever the agent lists disks, and
// Checker keeps the existing maps' paths). A group with some paths held
// by something else (md or LVM use one) or paths of different sizes gets
// none either, and skipped says why.
func Plan(paths []inventory.MultipathPath) (maps []Map, skipped []string) {
	var order []string
	groups := map[string][]inventory.MultipathPath{}
	for _, p := range paths {
		if p.WWID == "" {
			continue
		}
		if _, ok := groups[p.WWID]; !ok {
			order = append(order, p.WWID)
		}
		groups[p.WWID] = append(groups[p.WWID], p)
	}
	for _, wwid := range order {
		g := groups[wwid]
		if len(g) < 2 {
			continue
		}
		if allHeld(g) || mapOf(g) != "" {
			continue
		}
		names := pathNames(g)
		if why := refuse(wwid, g); why != "" {
			skipped = append(skipped, fmt.Sprintf("%s over %s: %s", wwid, names, why))
			continue
		}
		maps = append(maps, Map{Name: wwid, UUID: "mpath-" + wwid, Sectors: g[0].Sectors, Paths: g})
	}
	return maps, skipped
}

// refuse says why the paths g to wwid cannot become a map, "" if they can.
func refuse(wwid string, g []inventory.MultipathPath) string {
	for _, p := range g {
		if p.Held {
			return p.Name + " is held already (by a map made before the other paths came, md or LVM)"
		}
		if p.Sectors != g[0].Sectors {
			return fmt.Sprintf("path sizes differ (%s %d sectors, %s %d)", g[0].Name, g[0].Sectors, p.Name, p.Sectors)
		}
	}
	switch {
	case g[0].Sectors <= 0:
		return "the paths are empty"
	case len(wwid) > maxName || len("mpath-"+wwid) > maxUUID || strings.ContainsAny(wwid, "/\x00"):
		return "the WWID cannot name a device-mapper device (too long, or a slash or NUL in it)"
	}
	return ""
}

func allHeld(g []inventory.MultipathPath) bool {
	for _, p := range g {
		if !p.Held {
			return false
		}
	}
	return true
}

// mapOf returns the multipath map holding a path of g, "" if none does.
func mapOf(g []inventory.MultipathPath) string {
	for _, p := range g {
		if p.Map != "" {
			return p.Map
		}
	}
	return ""
}

func pathNames(g []inventory.MultipathPath) string {
	names := make([]string, len(g))
	for i, p := range g {
		names[i] = p.Name
	}
	return strings.Join(names, ",")
}

// Table is the map's device-mapper table, multipath-tools' for the
// defaults above: no features, no hardware handler (one a SCSI device
// already has, scsi_dh_alua for instance, stays attached and is used),
// one priority group that is also the first, the service-time selector
// without arguments, and each path as major:minor with a repeat count of 1.
//
// A map without paths (its last one gone) gets a table without priority
// groups: the map stays, its I/O fails, and a path that comes back is
// added again, as multipathd keeps a map whose paths were all removed.
func (m Map) Table() []devmapper.Target {
	var b strings.Builder
	if len(m.Paths) == 0 {
		b.WriteString("0 0 0 0")
	} else {
		fmt.Fprintf(&b, "0 0 1 1 service-time 0 %d 1", len(m.Paths))
	}
	for _, p := range m.Paths {
		fmt.Fprintf(&b, " %d:%d 1", p.Major, p.Minor)
	}
	return []devmapper.Target{{Start: 0, Length: uint64(m.Sectors), Type: "multipath", Params: b.String()}}
}

// Mapper makes device-mapper devices; *devmapper.Control is one.
type Mapper interface {
	Create(ctx context.Context, name, uuid string, table []devmapper.Target) (*devmapper.Device, error)
}

// Assemble makes the maps Plan finds among paths and returns the device
// nodes made (/dev/dm-N). A map that cannot be made is logged and left
// out: its paths stay plain disks, as with IPA when multipath fails.
func Assemble(ctx context.Context, dm Mapper, paths []inventory.MultipathPath, log *slog.Logger) []string {
	log = logging.OrDiscard(log)
	maps, skipped := Plan(paths)
	for _, s := range skipped {
		log.Info("multipath: no new map", "lun", s)
	}
	var made []string
	for _, m := range maps {
		if ctx.Err() != nil {
			break
		}
		d, err := dm.Create(ctx, m.Name, m.UUID, m.Table())
		if err != nil {
			log.Warn("multipath: cannot make the map; its paths stay separate disks", "wwid", m.Name, "paths", pathNames(m.Paths), "error", err)
			continue
		}
		log.Info(EventMapMade, "device", d.Path, "wwid", m.Name, "paths", pathNames(m.Paths), "sectors", m.Sectors)
		made = append(made, d.Path)
	}
	return made
}
