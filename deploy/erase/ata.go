package erase

import (
	"context"
	"fmt"

	"github.com/ironic-go/ironic-agent/deploy/ata"
)

// ataUnlockPasswords are the passwords a failed earlier attempt may have
// left, tried in IPA's order ("NULL", then ""): to hdparm 9.51 and later
// both are 32 zero bytes, while older hdparm set the literal text "NULL",
// so the second try is that text (two tries, as IPA makes, of the five a
// drive allows before its security count expires).
func ataUnlockPasswords() []ata.Password {
	literal, _ := ata.NewPassword("NULL")
	return []ata.Password{{}, literal}
}

func (e *Eraser) ataDrive(dev string) ata.Drive {
	p := e.ataPasser
	if p == nil {
		p = ata.SGIO{}
	}
	return ata.Drive{Path: dev, Passer: p}
}

// ataErase runs IPA's ATA Secure Erase state machine (_ata_erase) with ATA
// commands sent through SG_IO: IDENTIFY DEVICE word 128 stands for the
// lines of hdparm -I's Security section that IPA tests. supported is false
// when the drive does not offer the security feature set (the caller then
// overwrites); an error means the drive claims support but the erase could
// not be done.
func (e *Eraser) ataErase(ctx context.Context, dev string) (DeviceResult, bool, error) {
	drive := e.ataDrive(dev)
	// IPA's password "NULL": hdparm turns it into 32 zero bytes.
	var null ata.Password
	id, err := drive.Identify(ctx)
	if err != nil {
		// No ATA identify (SCSI, virtio, USB bridges without SAT): not
		// supported, as when IPA's hdparm -I fails.
		e.log().Info("ATA IDENTIFY DEVICE failed; ATA secure erase not available", "device", dev, "error", err)
		return DeviceResult{}, false, nil
	}
	sec := id.Security()
	e.log().Info(EventATASecurityState, "device", dev, "model", id.Model(), "security", sec.String())
	if !sec.Supported {
		return DeviceResult{}, false, nil
	}
	if sec.Frozen {
		return DeviceResult{}, true, fmt.Errorf("block device %s is frozen and cannot be erased (security: %s)", dev, sec)
	}
	if id, err = e.ataUnlock(ctx, drive, id); err != nil {
		return DeviceResult{}, true, err
	}
	sec = id.Security()
	if sec.Locked {
		return DeviceResult{}, true, fmt.Errorf("block device %s already has a security password set", dev)
	}
	if !sec.Enabled {
		if err := drive.SetPassword(ctx, null); err != nil {
			return DeviceResult{}, true, fmt.Errorf("security password set failed for device %s: %w", dev, err)
		}
	}
	enhanced, method := sec.EnhancedErase, MethodATAEnhanced
	if !enhanced {
		method = MethodATA
	}
	if err := drive.Erase(ctx, null, enhanced, id.EraseTimeout(enhanced)); err != nil {
		// Unlock so an overwrite fallback can still write to the drive.
		if _, uerr := e.ataUnlock(ctx, drive, ata.Identify{}); uerr != nil {
			e.log().Info("security unlock after a failed erase failed", "device", dev, "error", uerr)
		}
		return DeviceResult{}, true, fmt.Errorf("erase failed for device %s: %w", dev, err)
	}
	id, err = drive.Identify(ctx)
	if err != nil {
		return DeviceResult{}, true, fmt.Errorf("reading security state of %s after erase: %w", dev, err)
	}
	if sec := id.Security(); sec.Enabled {
		return DeviceResult{}, true, fmt.Errorf("an unknown error occurred erasing block device %s: security still enabled after erase (%s)", dev, sec)
	}
	return DeviceResult{Method: method}, true, nil
}

// ataUnlock unlocks a locked drive with the passwords a failed earlier
// attempt may have left, reading IDENTIFY again after each try; id is the
// last IDENTIFY data, or zero to read it first. It returns the last data.
func (e *Eraser) ataUnlock(ctx context.Context, drive ata.Drive, id ata.Identify) (ata.Identify, error) {
	var err error
	if id == (ata.Identify{}) {
		if id, err = drive.Identify(ctx); err != nil {
			return id, err
		}
	}
	for _, pw := range ataUnlockPasswords() {
		if !id.Security().Locked {
			break
		}
		if err := drive.Unlock(ctx, pw); err != nil {
			e.log().Info("security unlock failed", "device", drive.Path, "error", err)
		}
		if id, err = drive.Identify(ctx); err != nil {
			return id, err
		}
	}
	return id, nil
}
