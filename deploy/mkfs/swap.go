// Package mkfs makes the two filesystems a partition image needs that are
// small enough to write in Go: the swap signature (mkswap) and FAT
// (mkfs.vfat, for the EFI system partition and a vfat or msdos ephemeral
// partition). ext2/3/4 and xfs stay Debian's programs.
package mkfs

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Swap area header, version 1 (Linux include/linux/swap.h, union
// swap_header): the first page of the area.
const (
	swapBootBits  = 1024 // left for a disk label, zeroed
	swapLabelLen  = 16   // bytes of sws_volume, the last one NUL
	swapMinPages  = 10   // util-linux's mkswap refuses fewer
	swapSignature = "SWAPSPACE2"
)

// SwapHeader returns the first page of a swap area of size bytes with
// pages of pageSize bytes, as util-linux 2.38's mkswap writes it: the
// first 1024 bytes zero, then version 1, the last page's index, no bad
// pages, the UUID, the label (at most 15 bytes, NUL-terminated) and
// "SWAPSPACE2" in the page's last 10 bytes, in the
// machine's byte order (little-endian on every architecture the agent
// runs on).
func SwapHeader(size int64, pageSize int, uuid [16]byte, label string) ([]byte, error) {
	if pageSize < 4096 || pageSize&(pageSize-1) != 0 {
		return nil, fmt.Errorf("page size %d is not a power of two of at least 4096", pageSize)
	}
	pages := size / int64(pageSize)
	if pages < swapMinPages {
		return nil, fmt.Errorf("swap space needs at least %d pages of %d bytes, %d bytes hold %d", swapMinPages, pageSize, size, pages)
	}
	if pages-1 > 0xffffffff {
		return nil, fmt.Errorf("swap area of %d pages is beyond the 32-bit last_page of swap version 1", pages)
	}
	if len(label) > swapLabelLen-1 {
		return nil, fmt.Errorf("swap label %q is longer than %d bytes (mkswap keeps a terminating NUL)", label, swapLabelLen-1)
	}
	p := make([]byte, pageSize)
	h := p[swapBootBits:]
	binary.LittleEndian.PutUint32(h[0:], 1)               // version
	binary.LittleEndian.PutUint32(h[4:], uint32(pages-1)) // last_page
	binary.LittleEndian.PutUint32(h[8:], 0)               // nr_badpages
	copy(h[12:28], uuid[:])                               // sws_uuid
	copy(h[28:28+swapLabelLen], label)                    // sws_volume
	copy(p[pageSize-len(swapSignature):], swapSignature)
	return p, nil
}

// WriteSwap writes SwapHeader's page at the start of w.
func WriteSwap(w io.WriterAt, size int64, pageSize int, uuid [16]byte, label string) error {
	p, err := SwapHeader(size, pageSize, uuid, label)
	if err != nil {
		return err
	}
	if _, err := w.WriteAt(p, 0); err != nil {
		return fmt.Errorf("write swap header: %w", err)
	}
	return nil
}
