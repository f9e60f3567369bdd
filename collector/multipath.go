package collector

import (
	"context"
	"strings"

	"github.com/ironic-go/ironic-agent/inventory"
)

// MultipathPaths lists the whole SCSI disks ("sd*") below the root that
// multipath-tools' default configuration would consider: not empty, not
// hidden, with a WWID, and (its default blacklist exception) with an
// ID_WWN or SCSI_IDENT_* property, so a disk without a real identifier
// never joins a map. Values come from udev's records when there are
// some, else from sysfs as udev would compute them (see Disks).
func MultipathPaths(ctx context.Context, opts Options) ([]inventory.MultipathPath, error) {
	c := newDiskCollector(opts)
	var devs []*blockDev
	for _, name := range c.r.entries("sys/block") {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(name, "sd") {
			continue
		}
		d, ok := c.probe(name)
		if !ok || d.isPart || d.typ != "disk" || d.size == 0 {
			continue
		}
		devs = append(devs, d)
	}
	sortByDevno(devs)
	var out []inventory.MultipathPath
	for _, d := range devs {
		props := c.props(d)
		if props["ID_SERIAL"] == "" || !hasIdentifier(props) {
			continue
		}
		mp, _ := c.multipathHolder(d)
		out = append(out, inventory.MultipathPath{
			Name: d.name, Major: d.major, Minor: d.minor, Sectors: d.size / 512,
			WWID: props["ID_SERIAL"], Held: len(c.r.entries(d.base+"/holders")) > 0, Map: mp,
		})
	}
	return out, nil
}

// hasIdentifier is multipath-tools' default blacklist_exceptions
// property "(SCSI_IDENT_|ID_WWN)": a device is a path candidate only with
// a property whose name matches that regular expression (unanchored).
func hasIdentifier(props map[string]string) bool {
	for k := range props {
		if strings.Contains(k, "SCSI_IDENT_") || strings.Contains(k, "ID_WWN") {
			return true
		}
	}
	return false
}
