package collector

import (
	"github.com/ironic-go/ironic-agent/collector/internal/udev"
)

// udevSys gives package udev the disk collector's reader, so what the
// emulated rules read is traced and warned about as every other read.
type udevSys struct{ r *sysReader }

func (s udevSys) Read(rel string) ([]byte, error)    { return s.r.read(rel) }
func (s udevSys) Attr(rel string) (string, bool)     { return s.r.attr(rel) }
func (s udevSys) Entries(rel string) []string        { return s.r.entries(rel) }
func (s udevSys) Readlink(rel string) (string, bool) { return s.r.readlink(rel) }
func (s udevSys) Resolve(rel string) (string, error) { return s.r.resolve(rel) }
func (s udevSys) IsDir(rel string) bool              { return s.r.isDir(rel) }
func (s udevSys) Warn(rel, reason string)            { s.r.warnOnce(rel, reason) }

func (c *diskCollector) sys() udev.Sys { return udevSys{c.r} }

func (d *blockDev) udevDevice() udev.Device {
	return udev.Device{Name: d.name, Base: d.base, DevPath: d.devPath, IsPart: d.isPart}
}

// deriveProps computes the properties udev's rules would have stored for
// d, from sysfs (package udev).
func (c *diskCollector) deriveProps(d *blockDev) map[string]string {
	return udev.Props(c.sys(), d.udevDevice(), func(name string) (udev.Device, bool) {
		p, ok := c.probe(name)
		if !ok {
			return udev.Device{}, false
		}
		return p.udevDevice(), true
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
