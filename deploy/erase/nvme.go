package erase

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/nvme"
	"github.com/ironic-go/ironic-agent/internal/lazyregexp"
)

// nvmeDevice is an NVMe namespace opened for admin commands.
type nvmeDevice interface {
	nvme.Device
	Close() error
}

// openNVMe opens dev for admin commands: e.nvmeOpen when a test set it,
// else the kernel's NVME_IOCTL_ADMIN_CMD on the namespace's block device.
func (e *Eraser) openNVMe(dev string) (nvmeDevice, error) {
	if e.nvmeOpen != nil {
		return e.nvmeOpen(dev)
	}
	return nvme.Open(dev)
}

// nvmeErase formats an NVMe namespace with the strongest secure-erase
// setting its controller reports (IPA's _nvme_erase).
func (e *Eraser) nvmeErase(ctx context.Context, dev string) (DeviceResult, error) {
	return e.withNVMe(ctx, dev, func(d nvme.Device, id nvme.Controller) (DeviceResult, error) {
		return e.nvmeFormat(ctx, dev, d, id)
	})
}

// withNVMe opens dev, reads its controller's Identify data and runs fn
// with both; the device is closed when fn returns.
func (e *Eraser) withNVMe(ctx context.Context, dev string, fn func(nvme.Device, nvme.Controller) (DeviceResult, error)) (DeviceResult, error) {
	d, err := e.openNVMe(dev)
	if err != nil {
		return DeviceResult{}, fmt.Errorf("failed to fetch NVMe capabilities for device %s: %w", dev, err)
	}
	defer d.Close()
	id, err := e.nvmeIdentify(ctx, dev, d)
	if err != nil {
		return DeviceResult{}, err
	}
	return fn(d, id)
}

// nvmeIdentify reads the controller's Identify data (IPA: `nvme id-ctrl`).
func (e *Eraser) nvmeIdentify(ctx context.Context, dev string, d nvme.Device) (nvme.Controller, error) {
	id, err := nvme.IdentifyController(ctx, d)
	if err != nil {
		return nvme.Controller{}, fmt.Errorf("failed to fetch NVMe capabilities for device %s: %w", dev, err)
	}
	return id, nil
}

// nvmeFormat runs the format IPA chooses from id on dev's namespace,
// keeping its current LBA format. When the format would also hit other
// namespaces of the controller (fna bits 0/1), each of them must pass the
// guard too.
func (e *Eraser) nvmeFormat(ctx context.Context, dev string, d nvme.Device, id nvme.Controller) (DeviceResult, error) {
	ses, err := nvmeFormatMode(id)
	if err != nil {
		return DeviceResult{}, fmt.Errorf("device %s: %w", dev, err)
	}
	if id.FNA&(nvme.FNAFormatAllNamespaces|nvme.FNAEraseAllNamespaces) != 0 {
		if err := e.guardSiblingNamespaces(dev, fmt.Sprintf("NVMe format of %s (fna=%#x)", dev, id.FNA), false); err != nil {
			return DeviceResult{}, err
		}
	}
	nsid, err := d.NamespaceID()
	if err != nil {
		return DeviceResult{}, fmt.Errorf("failed to nvme format device %s: %w", dev, err)
	}
	ns, err := nvme.IdentifyNamespace(ctx, d, nsid)
	if err != nil {
		return DeviceResult{}, fmt.Errorf("failed to nvme format device %s: reading the current LBA format: %w", dev, err)
	}
	e.log().Info("NVMe format", "device", dev, "nsid", nsid, "ses", ses, "lba_format", ns.LBAFormat(), "block_size", ns.BlockSize)
	if err := nvme.Format(ctx, d, nsid, ns, ses); err != nil {
		return DeviceResult{}, fmt.Errorf("failed to nvme format device %s: %w", dev, err)
	}
	if ses == nvme.SESCrypto {
		return DeviceResult{Method: MethodNVMeCrypto}, nil
	}
	return DeviceResult{Method: MethodNVMeUserData}, nil
}

// nvmeFormatMode is IPA's choice: crypto erase (ses 2) when fna says so,
// else user-data erase (ses 1); no format support is an error.
func nvmeFormatMode(id nvme.Controller) (uint8, error) {
	if id.OACS&nvme.OACSFormatNVM == 0 {
		return 0, errors.New("the controller reports no supported format modes (Identify Controller OACS bit 1, Format NVM, clear)")
	}
	if id.FNA&nvme.FNACryptoErase != 0 {
		return nvme.SESCrypto, nil
	}
	return nvme.SESUserData, nil
}

// guardSiblingNamespaces checks that every other namespace of dev's
// controller (or, for a sanitize, of its NVM subsystem) passes the guard
// before an operation that erases them all.
func (e *Eraser) guardSiblingNamespaces(dev, what string, subsystem bool) error {
	list, scope := e.nvmeSiblingNamespaces, "controller"
	if subsystem {
		list, scope = e.nvmeSubsystemNamespaces, "NVM subsystem"
	}
	siblings, err := list(dev)
	if err != nil {
		return fmt.Errorf("%s applies to every namespace of the %s, which cannot be listed: %w", what, scope, err)
	}
	for _, ns := range siblings {
		if err := e.Guard.Check(ns); err != nil {
			return fmt.Errorf("%s would also erase namespace %s: %w", what, ns, err)
		}
	}
	return nil
}

// nvmeSiblingNamespaces lists the other namespaces of dev's controller as
// /dev paths of their block devices, or an error when they cannot be
// known (then a format that hits all namespaces must not run).
func (e *Eraser) nvmeSiblingNamespaces(dev string) ([]string, error) {
	dir, self, err := e.nvmeNamespace(dev)
	if err != nil {
		return nil, err
	}
	out, err := nvmeNamespacesIn(self, []string{filepath.Join(dir, "device")})
	if err != nil {
		return nil, fmt.Errorf("list namespaces of the controller of %s: %w", dev, err)
	}
	return out, nil
}

// nvmeNamespace returns dev's sysfs directory and the /dev path of its
// namespace (the head, for a multipath path device).
func (e *Eraser) nvmeNamespace(dev string) (sysDir, head string, err error) {
	dir, err := blockdev.SysBlockDir(e.root(), dev)
	if err != nil {
		return "", "", err
	}
	m := nvmeNamespaceRE.FindStringSubmatch(filepath.Base(dir))
	if m == nil {
		return "", "", fmt.Errorf("%s is not an NVMe namespace device", dev)
	}
	return dir, "/dev/nvme" + m[1] + "n" + m[2], nil
}

// nvmeNamespaceRE matches a namespace block device below an NVMe
// controller in sysfs: nvme<S>n<N>, or nvme<S>c<C>n<N> for a path of a
// namespace under native multipath (its device is the head nvme<S>n<N>).
var nvmeNamespaceRE = lazyregexp.New(`^nvme(\d+)(?:c\d+)?n(\d+)$`)

// nvmeNamespacesIn lists the namespaces in sysfs directories (controllers,
// subsystems) as the /dev paths of their block devices, sorted, without
// self. A path device nvme<S>c<C>n<N> is the head nvme<S>n<N>.
func nvmeNamespacesIn(self string, dirs []string) ([]string, error) {
	seen := map[string]bool{self: true}
	var out []string
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			return nil, err
		}
		for _, en := range ents {
			m := nvmeNamespaceRE.FindStringSubmatch(en.Name())
			if m == nil {
				continue
			}
			if ns := "/dev/nvme" + m[1] + "n" + m[2]; !seen[ns] {
				seen[ns] = true
				out = append(out, ns)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
