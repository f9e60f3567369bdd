package vmedia

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// Volume is what the first bytes of a block device say about the file
// system on it, as far as virtual media needs.
type Volume struct {
	FSType    string // iso9660 or vfat (mount's type); "" for anything else
	Label     string
	Publisher string // ISO 9660 publisher ID (Ironic's ir_pub_id); "" for vfat
}

// Probe reads the start of dev and says which virtual-media file system
// is on it: ISO 9660 or FAT, with its label.
func Probe(dev string) (Volume, error) {
	head, err := blockdev.ReadFSHead(dev)
	if err != nil {
		return Volume{}, err
	}
	return probeHead(head), nil
}

func probeHead(head []byte) Volume {
	if l := blockdev.ISOVolumeID(head); l != "" {
		return Volume{FSType: "iso9660", Label: l, Publisher: blockdev.ISOPublisherID(head)}
	}
	if l := blockdev.FATLabel(head); l != "" {
		return Volume{FSType: "vfat", Label: l}
	}
	return Volume{}
}

// usbDiskLimit is IPA's bound on a USB disk taken for virtual media: a
// BMC's virtual stick is small, a real disk on USB is not.
const usbDiskLimit = 4 << 30

// Check is IPA's _check_vmedia_device from sysfs instead of lsblk: nil
// when the block device name (below sysBlock, /sys/class/block) looks like
// virtual media, a CD-ROM (SCSI type 5, lsblk's "rom") or a USB disk
// (lsblk's transport "usb": a USB device in its sysfs path) smaller than
// 4 GiB; otherwise why not. A partition never is.
func Check(sysBlock, name string) error {
	dir := filepath.Join(sysBlock, name)
	if _, err := os.Stat(filepath.Join(dir, "partition")); err == nil {
		return errors.New("a partition")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "device", "type")); err == nil && strings.TrimSpace(string(b)) == "5" {
		return nil
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("sysfs: %w", err)
	}
	if !strings.Contains(real, "/usb") {
		return errors.New("neither a CD-ROM nor a USB disk")
	}
	b, err := os.ReadFile(filepath.Join(dir, "size"))
	if err != nil {
		return fmt.Errorf("USB disk of unknown size: %w", err)
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return fmt.Errorf("USB disk of unknown size: %s: %q", filepath.Join(dir, "size"), b)
	}
	if size := sectors * 512; size >= usbDiskLimit {
		return fmt.Errorf("a USB disk of %d bytes, not under 4 GiB", size)
	}
	return nil
}
