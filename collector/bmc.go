package collector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/ironic-go/ironic-agent/bmc"
)

// collectBMC fills bmc_address, bmc_v6address and bmc_mac (package bmc has
// IPA's rules). Without an IPMI device all three stay null (bmc_mac
// absent); with one, the BMC is asked through opts.IPMI, or the device
// itself on a live root. A recorded tree whose device has no recorded
// replies gets what a BMC that answers nothing gives: "0.0.0.0" and "::/0".
func collectBMC(ctx context.Context, c *collection) error {
	if c.opts.SkipBMC {
		return nil
	}
	dev, ok := findIPMIDevice(c.fs)
	if !ok {
		return nil
	}
	t := c.opts.IPMI
	if t == nil {
		if c.fs.live() {
			d, err := bmc.OpenDevice(c.fs.Path(dev))
			if err != nil {
				c.warn("bmc", err)
				t = noBMC{err}
			} else {
				defer d.Close()
				t = d
			}
		} else {
			t = noBMC{errors.New("no recorded IPMI replies (ipmi.json) for this tree")}
		}
	}
	got, err := bmc.Detect(ctx, t, c.log)
	if err != nil {
		return fmt.Errorf("asking the BMC through %s: %w", dev, err)
	}
	c.inv.BMCAddress, c.inv.BMCV6Address, c.inv.BMCMAC = got.IPv4, got.IPv6, got.MAC
	return nil
}

// findIPMIDevice returns the first IPMI device node below the root. On the
// live system it must be a character device, as IPA checks; a fixture tree
// holds an empty regular file in its place.
func findIPMIDevice(f rootFS) (string, bool) {
	for _, p := range bmc.DeviceNodes() {
		fi, err := f.Stat(p)
		if err != nil {
			continue
		}
		if !f.live() || fi.Mode()&fs.ModeCharDevice != 0 {
			return p, true
		}
	}
	return "", false
}

// noBMC answers every request with the error that kept the BMC out of
// reach.
type noBMC struct{ err error }

func (n noBMC) Send(context.Context, bmc.Request) ([]byte, error) { return nil, n.err }
