package erase

import (
	"context"
	"errors"
	"fmt"

	"github.com/ironic-go/ironic-agent/internal/programs"
)

// ataErase runs IPA's ATA Secure Erase state machine through hdparm.
// supported is false when the drive does not offer the security feature
// set (the caller then overwrites); an error means the drive claims
// support but the erase could not be done.
func (e *Eraser) ataErase(ctx context.Context, dev string) (DeviceResult, bool, error) {
	lines, err := e.ataSecurity(ctx, dev)
	if missing := (*programs.MissingError)(nil); errors.As(err, &missing) {
		// Without hdparm every SATA disk would look unsupported and be
		// overwritten: refuse instead, naming the program.
		return DeviceResult{}, true, fmt.Errorf("ATA secure erase of %s: %w", dev, err)
	}
	if err != nil {
		// No ATA identify (SCSI, virtio, USB bridges): not supported.
		e.log().Info("hdparm -I failed; ATA secure erase not available", "device", dev, "error", err)
		return DeviceResult{}, false, nil
	}
	if !hasLine(lines, "supported") {
		return DeviceResult{}, false, nil
	}
	if !hasLine(lines, "not frozen") {
		return DeviceResult{}, true, fmt.Errorf("block device %s is frozen and cannot be erased (security lines: %q)", dev, lines)
	}
	if lines, err = e.ataUnlock(ctx, dev, lines); err != nil {
		return DeviceResult{}, true, err
	}
	if !hasLine(lines, "not locked") {
		return DeviceResult{}, true, fmt.Errorf("block device %s already has a security password set", dev)
	}
	if hasLine(lines, "not enabled") {
		if _, err := e.Runner.Run(ctx, "hdparm", "--user-master", "u", "--security-set-pass", "NULL", dev); err != nil {
			return DeviceResult{}, true, fmt.Errorf("security password set failed for device %s: %w", dev, err)
		}
	}
	option, method := "--security-erase-enhanced", MethodATAEnhanced
	if hasLine(lines, "not supported: enhanced erase") {
		option, method = "--security-erase", MethodATA
	}
	if _, err := e.Runner.Run(ctx, "hdparm", "--user-master", "u", option, "NULL", dev); err != nil {
		// Unlock so an overwrite fallback can still write to the drive.
		_, _ = e.ataUnlock(ctx, dev, nil)
		return DeviceResult{}, true, fmt.Errorf("erase failed for device %s: %w", dev, err)
	}
	lines, err = e.ataSecurity(ctx, dev)
	if err != nil {
		return DeviceResult{}, true, fmt.Errorf("reading security state of %s after erase: %w", dev, err)
	}
	if !hasLine(lines, "not enabled") {
		return DeviceResult{}, true, fmt.Errorf("an unknown error occurred erasing block device %s: security still enabled after erase (%q)", dev, lines)
	}
	return DeviceResult{Method: method}, true, nil
}

func (e *Eraser) ataSecurity(ctx context.Context, dev string) ([]string, error) {
	out, err := e.Runner.Run(ctx, "hdparm", "-I", dev)
	if err != nil {
		return nil, err
	}
	return ataSecurityLines(string(out)), nil
}

// ataUnlock tries the passwords a failed earlier attempt may have left:
// "NULL", then "" (hdparm before 9.51 took NULL literally).
func (e *Eraser) ataUnlock(ctx context.Context, dev string, lines []string) ([]string, error) {
	var err error
	if lines == nil {
		if lines, err = e.ataSecurity(ctx, dev); err != nil {
			return nil, err
		}
	}
	for _, pw := range []string{"NULL", ""} {
		if hasLine(lines, "not locked") {
			break
		}
		if _, err := e.Runner.Run(ctx, "hdparm", "--user-master", "u", "--security-unlock", pw, dev); err != nil {
			e.log().Info("security unlock failed", "device", dev, "password", pw, "error", err)
		}
		if lines, err = e.ataSecurity(ctx, dev); err != nil {
			return nil, err
		}
	}
	return lines, nil
}
