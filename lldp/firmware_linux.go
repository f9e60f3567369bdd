package lldp

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/ironic-go/ironic-agent/internal/lockdown"
	"github.com/mdlayher/ethtool"
)

// Intel X710/XL710 (i40e) NICs run an LLDP agent in firmware that consumes
// LLDP frames before the host sees them. IPA's Intel CNA hardware manager
// writes "lldp stop" to the driver's debugfs command file of every port
// (ironic_python_agent/hardware_managers/cna.py); we do the same, and where
// debugfs is not there we set the driver's "disable-fw-lldp" private flag
// instead, which the driver documents for this purpose.
const (
	i40eDriver       = "i40e"
	i40eFlagNoFWLLDP = "disable-fw-lldp"
)

// privateFlags is the part of ethtool the firmware handling needs; tests
// replace it.
type privateFlags interface {
	Get(iface string) (map[string]bool, error)
	Set(iface, flag string, on bool) error
	Close() error
}

// firmwareLLDP remembers the private flags to put back after the capture.
type firmwareLLDP struct {
	flags  privateFlags
	undo   []string // interfaces whose disable-fw-lldp flag we turned on
	logger *slog.Logger
}

// stopFirmwareLLDP stops the firmware LLDP agent of every i40e interface
// among ifaces. root is where sysfs and debugfs are found ("/" outside
// tests); openFlags opens the ethtool client, only when an i40e NIC needs it.
// Failures are logged, not returned: the capture then simply hears nothing
// on that NIC, which IPA also tolerates.
func stopFirmwareLLDP(ctx context.Context, root string, ifaces []string, openFlags func() (privateFlags, error), logger *slog.Logger) *firmwareLLDP {
	fw := &firmwareLLDP{logger: logger}
	for _, name := range ifaces {
		if ctx.Err() != nil {
			break
		}
		dev := filepath.Join(root, "sys/class/net", name, "device")
		drv, err := os.Readlink(filepath.Join(dev, "driver"))
		if err != nil || filepath.Base(drv) != i40eDriver {
			continue
		}
		pciLink, err := os.Readlink(dev)
		if err != nil {
			logger.Warn("i40e interface without a PCI device link; firmware LLDP agent left running", "interface", name, "error", err)
			continue
		}
		pci := filepath.Base(pciLink)
		cmd := filepath.Join(root, "sys/kernel/debug/i40e", pci, "command")
		err = os.WriteFile(cmd, []byte("lldp stop"), 0)
		if err == nil {
			logger.Info("stopped the i40e firmware LLDP agent through debugfs", "interface", name, "pci", pci)
			continue
		}
		// Under Secure Boot's lockdown debugfs refuses writes: the log
		// says so rather than a bare "operation not permitted".
		err = lockdown.Explain(err, "debugfs write "+cmd, filepath.Join(root, lockdown.ModePath))
		logger.Info("i40e debugfs not usable, trying the private flag", "interface", name, "path", cmd, "error", err)
		if err := fw.setFlag(name, openFlags); err != nil {
			logger.Warn("could not stop the i40e firmware LLDP agent; LLDP frames may not reach the host", "interface", name, "error", err)
		}
	}
	return fw
}

func (fw *firmwareLLDP) setFlag(name string, openFlags func() (privateFlags, error)) error {
	if fw.flags == nil {
		f, err := openFlags()
		if err != nil {
			return fmt.Errorf("ethtool: %w", err)
		}
		fw.flags = f
	}
	flags, err := fw.flags.Get(name)
	if err != nil {
		return fmt.Errorf("reading private flags: %w", err)
	}
	on, ok := flags[i40eFlagNoFWLLDP]
	if !ok {
		return fmt.Errorf("driver has no %q private flag", i40eFlagNoFWLLDP)
	}
	if on {
		return nil // already stopped by someone else; leave it so
	}
	if err := fw.flags.Set(name, i40eFlagNoFWLLDP, true); err != nil {
		return fmt.Errorf("setting %s: %w", i40eFlagNoFWLLDP, err)
	}
	fw.undo = append(fw.undo, name)
	fw.logger.Info("stopped the i40e firmware LLDP agent with the private flag (the port resets)", "interface", name)
	return nil
}

// restore turns the firmware agents stopped by private flag back on: some
// firmware keeps that flag across reboots, and the deployed system should
// get the NIC as it was.
func (fw *firmwareLLDP) restore() {
	if fw.flags == nil {
		return
	}
	for _, name := range fw.undo {
		if err := fw.flags.Set(name, i40eFlagNoFWLLDP, false); err != nil {
			fw.logger.Warn("could not restart the i40e firmware LLDP agent", "interface", name, "error", err)
		}
	}
	_ = fw.flags.Close()
}

// ethtoolFlags is privateFlags over the kernel's ethtool netlink interface.
type ethtoolFlags struct{ c *ethtool.Client }

func newEthtoolFlags() (privateFlags, error) {
	c, err := ethtool.New()
	if err != nil {
		return nil, err
	}
	return ethtoolFlags{c}, nil
}

func (e ethtoolFlags) Get(iface string) (map[string]bool, error) {
	p, err := e.c.PrivateFlags(ethtool.Interface{Name: iface})
	if err != nil {
		return nil, err
	}
	return p.Flags, nil
}

func (e ethtoolFlags) Set(iface, flag string, on bool) error {
	return e.c.SetPrivateFlags(ethtool.PrivateFlags{
		Interface: ethtool.Interface{Name: iface},
		Flags:     map[string]bool{flag: on},
	})
}

func (e ethtoolFlags) Close() error { return e.c.Close() }
