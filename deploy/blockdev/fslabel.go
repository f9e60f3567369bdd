package blockdev

import (
	"bytes"
	"strings"
)

// fsLabel returns the filesystem label blkid reports for b, the first
// fsProbeLen bytes of a device: ext2/3/4, XFS, btrfs, FAT, ISO9660; ""
// when there is none.
func fsLabel(b []byte) string {
	at := func(off int, magic string) bool {
		return len(b) >= off+len(magic) && string(b[off:off+len(magic)]) == magic
	}
	field := func(off, n int) string {
		if len(b) < off+n {
			return ""
		}
		return strings.TrimRight(string(bytes.TrimRight(b[off:off+n], "\x00")), " ")
	}
	switch {
	case at(0x10040, "_BHRfS_M"):
		return field(0x10000+0x12b, 256)
	case at(0, "XFSB"):
		return field(108, 12)
	case at(0x438, "\x53\xef"):
		return field(1024+0x78, 16)
	}
	if l := FATLabel(b); l != "" && l != "NO NAME" {
		return l
	}
	return ISOVolumeID(b)
}

// FSLabel returns the label of the filesystem on dev ("" if it has none
// or none is recognised), what `mount LABEL=...` matches.
func FSLabel(dev string) (string, error) {
	head, err := ReadFSHead(dev)
	if err != nil {
		return "", err
	}
	return fsLabel(head), nil
}
