package erase

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/nvme"
	"github.com/ironic-go/ironic-agent/internal/lazyregexp"
)

// NVMe sanitize (NVMe base specification: Sanitize command, opcode 84h;
// Sanitize Status log page, 81h). A sanitize erases all user data of the
// whole NVM subsystem, including areas a host write never reaches
// (over-provisioning, caches), and the drive finishes it in the
// background, even across a power cycle. IPA (master, 2026) only formats;
// the issue asks for sanitize where the controller offers it.
const (
	defaultSanitizePoll = 2 * time.Second
	// sanitizeStartGrace is how many polls may still show no sanitize at
	// all after the command was accepted before that counts as failure.
	sanitizeStartGrace = 3
)

// nvmeSanitizeAction is the express erase's choice from SANICAP: crypto
// erase (seconds: the media key is replaced) before block erase; the
// overwrite action takes hours and is never used here.
func nvmeSanitizeAction(id nvme.Controller) (sanact uint8, method string, ok bool) {
	switch {
	case id.SANICAP&nvme.SANICAPCryptoErase != 0:
		return nvme.SanitizeCryptoErase, MethodNVMeSanitizeCrypto, true
	case id.SANICAP&nvme.SANICAPBlockErase != 0:
		return nvme.SanitizeBlockErase, MethodNVMeSanitizeBlock, true
	}
	return 0, "", false
}

// nvmeExpress is the express erase of an NVMe namespace: sanitize when
// the controller offers crypto or block erase, else IPA's format.
func (e *Eraser) nvmeExpress(ctx context.Context, dev string) (DeviceResult, error) {
	return e.withNVMe(ctx, dev, func(d nvme.Device, id nvme.Controller) (DeviceResult, error) {
		if sanact, method, ok := nvmeSanitizeAction(id); ok {
			return e.nvmeSanitize(ctx, dev, d, sanact, method)
		}
		return e.nvmeFormat(ctx, dev, d, id)
	})
}

// nvmeSanitize starts a sanitize and polls the Sanitize Status log until
// the controller reports it done, failed, or ctx ends. Success needs the
// log to say "completed successfully" with Global Data Erased set: an old
// successful sanitize would otherwise pass for this one; GDE is cleared
// by any write since then (a deployed image, for one).
func (e *Eraser) nvmeSanitize(ctx context.Context, dev string, d nvme.Device, sanact uint8, method string) (DeviceResult, error) {
	// Sanitize ignores the namespace: every namespace of the subsystem is
	// erased, so every one must be ours to erase.
	if err := e.guardSiblingNamespaces(dev, "NVMe sanitize of "+dev, true); err != nil {
		return DeviceResult{}, err
	}
	if err := nvme.Sanitize(ctx, d, sanact); err != nil {
		return DeviceResult{}, fmt.Errorf("failed to start the NVMe sanitize of %s: %w", dev, err)
	}
	e.log().Info("NVMe sanitize started", "device", dev, "method", method)
	poll := e.sanitizePoll
	if poll <= 0 {
		poll = defaultSanitizePoll
	}
	waitEnded := func() error {
		return fmt.Errorf("waiting for the NVMe sanitize of %s (the drive goes on with it): %w", dev, ctx.Err())
	}
	lastLog := time.Now()
	for polls := 1; ; polls++ {
		l, err := nvme.SanitizeStatus(ctx, d)
		if err != nil && ctx.Err() != nil {
			return DeviceResult{}, waitEnded()
		}
		if err != nil {
			return DeviceResult{}, fmt.Errorf("reading the sanitize status of %s: %w", dev, err)
		}
		switch l.State() {
		case nvme.SanitizeDone, nvme.SanitizeDoneDeallocated:
			if l.Status&nvme.SSTATGlobalDataErased == 0 {
				return DeviceResult{}, fmt.Errorf("NVMe sanitize of %s: the controller reports a completed sanitize but not that all data is erased (SSTAT=%#04x, Global Data Erased clear); the sanitize command did not run", dev, l.Status)
			}
			return DeviceResult{Method: method}, nil
		case nvme.SanitizeInProgress:
			if time.Since(lastLog) >= 30*time.Second {
				e.log().Info("NVMe sanitize running", "device", dev, "percent", int(l.Progress)*100/65536)
				lastLog = time.Now()
			}
		case nvme.SanitizeFailed:
			return DeviceResult{}, fmt.Errorf("NVMe sanitize of %s failed: the controller reports the operation failed (SSTAT=%#04x); the drive stays in sanitize failure mode until a sanitize succeeds", dev, l.Status)
		case nvme.SanitizeNever:
			if polls > sanitizeStartGrace {
				return DeviceResult{}, fmt.Errorf("NVMe sanitize of %s: the controller reports no sanitize operation after the command (SSTAT=%#04x)", dev, l.Status)
			}
		default:
			return DeviceResult{}, fmt.Errorf("NVMe sanitize of %s: unknown sanitize status (SSTAT=%#04x)", dev, l.Status)
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return DeviceResult{}, waitEnded()
		case <-t.C:
		}
	}
}

// nvmeControllerRE matches an NVMe controller's sysfs name.
var nvmeControllerRE = lazyregexp.New(`^nvme\d+$`)

// nvmeSubsystemNamespaces lists the other namespaces of the NVM subsystem
// dev belongs to, as /dev paths: a sanitize erases them all, whichever
// controller they are attached to. The subsystem comes from
// /sys/class/nvme-subsystem (a multipath head's device is the subsystem
// itself); without that class (old kernels) only dev's controller is
// listed. Namespaces attached to no controller of this host cannot be
// seen at all.
func (e *Eraser) nvmeSubsystemNamespaces(dev string) ([]string, error) {
	dir, self, err := e.nvmeNamespace(dev)
	if err != nil {
		return nil, err
	}
	ctrl := blockdev.ResolveLink(filepath.Join(dir, "device"))
	dirs := []string{ctrl}
	subsys := ""
	if strings.HasPrefix(filepath.Base(ctrl), "nvme-subsys") {
		subsys = ctrl
	} else if m, _ := filepath.Glob(filepath.Join(e.root(), "sys/class/nvme-subsystem/*", filepath.Base(ctrl))); len(m) == 1 {
		subsys = filepath.Dir(m[0])
	}
	if subsys != "" {
		ents, err := os.ReadDir(subsys)
		if err != nil {
			return nil, fmt.Errorf("list the NVM subsystem of %s: %w", dev, err)
		}
		dirs = append(dirs, subsys)
		for _, en := range ents {
			if nvmeControllerRE.MatchString(en.Name()) {
				dirs = append(dirs, filepath.Join(subsys, en.Name()))
			}
		}
	}
	out, err := nvmeNamespacesIn(self, dirs)
	if err != nil {
		return nil, fmt.Errorf("list the namespaces of the NVM subsystem of %s: %w", dev, err)
	}
	return out, nil
}
