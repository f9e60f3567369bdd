package rdinit

import (
	"testing"
	"testing/fstest"
)

func TestUSBStoragePending(t *testing.T) {
	sys := fstest.MapFS{
		// Scanned: a disk below the host.
		"bus/usb/drivers/usb-storage/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sr0/size": {Data: []byte("2048\n")},
		// Scanned, the disk not attached yet.
		"bus/usb/drivers/usb-storage/2-3:1.0/host8/target8:0:0/8:0:0:0/type": {Data: []byte("0\n")},
		// Bound, delay_use not over: a host, no target.
		"bus/usb/drivers/usb-storage/2-2:1.0/host7/scsi_host/host7/proc_name": {Data: []byte("usb-storage\n")},
		"bus/usb/drivers/usb-storage/bind":                                    {Data: nil},
		"bus/usb/drivers/usb-storage/module/refcnt":                           {Data: []byte("0\n")},
	}
	if n := usbStoragePending(sys); n != 2 {
		t.Errorf("pending %d, want 2 (2-2:1.0, 2-3:1.0)", n)
	}
	if n := usbStorageUnscanned(sys); n != 1 {
		t.Errorf("unscanned %d, want 1 (2-2:1.0)", n)
	}
	if n := usbStoragePending(fstest.MapFS{}); n != 0 {
		t.Errorf("no usb_storage: pending %d, want 0", n)
	}
}
