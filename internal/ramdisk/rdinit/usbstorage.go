package rdinit

import (
	"io/fs"
	"path"
	"time"
)

// usbStoragePending counts the USB mass-storage interfaces usb_storage
// has bound whose SCSI host has no block device yet. usb_storage scans a
// new device only after its delay_use (1 s by default), so right after the
// driver loads, a BMC's virtual media or a stick has a host and no disk:
// the block devices are not settled while any is pending. sysfs is /sys.
func usbStoragePending(sysfs fs.FS) int { return usbStorageHostsWithout(sysfs, "target*/*/block") }

// usbStorageHostsWithout counts the SCSI hosts of usb_storage's
// interfaces with nothing matching the glob below them.
func usbStorageHostsWithout(sysfs fs.FS, below string) int {
	hosts, _ := fs.Glob(sysfs, "bus/usb/drivers/usb-storage/*:*/host*")
	n := 0
	for _, h := range hosts {
		if m, _ := fs.Glob(sysfs, path.Join(h, below)); len(m) == 0 {
			n++
		}
	}
	return n
}

// usbStorageUnscanned counts the USB mass-storage interfaces usb_storage
// has bound whose SCSI host has no target yet (delay_use not over).
func usbStorageUnscanned(sysfs fs.FS) int { return usbStorageHostsWithout(sysfs, "target*") }

// waitUSBStorageScan waits, at most limit, until usb_storage has scanned
// every device it bound, and says whether there was one to wait for.
func waitUSBStorageScan(sysfs fs.FS, limit time.Duration) bool {
	if usbStorageUnscanned(sysfs) == 0 {
		return false
	}
	for deadline := time.Now().Add(limit); usbStorageUnscanned(sysfs) > 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	return true
}
