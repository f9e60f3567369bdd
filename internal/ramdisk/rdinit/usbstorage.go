package rdinit

import (
	"io/fs"
	"path"
)

// usbStoragePending counts the USB mass-storage interfaces usb_storage
// has bound whose SCSI host has no block device yet. usb_storage scans a
// new device only after its delay_use (1 s by default), so right after the
// driver loads, a BMC's virtual media or a stick has a host and no disk:
// the block devices are not settled while any is pending. sysfs is /sys.
func usbStoragePending(sysfs fs.FS) int {
	hosts, _ := fs.Glob(sysfs, "bus/usb/drivers/usb-storage/*:*/host*")
	n := 0
	for _, h := range hosts {
		if blocks, _ := fs.Glob(sysfs, path.Join(h, "target*", "*", "block")); len(blocks) == 0 {
			n++
		}
	}
	return n
}
