package mkfs

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"time"
	"unsafe"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"golang.org/x/sys/unix"
)

// target is a partition opened to be formatted.
type target struct {
	f          *os.File
	size       int64
	sectorSize int
	block      bool
}

// open wipes part's metadata regions (as mkswap and mkfs.fat clear the
// signatures of what was there before: a stale one beside the new
// filesystem would make blkid's answer ambiguous) and opens it for
// writing, without O_DIRECT since the structures are small and unaligned.
func open(ctx context.Context, g *blockdev.Guard, part string) (*target, error) {
	if _, err := blockdev.WipeMetadata(ctx, g, part); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(part, os.O_RDWR|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", part, err)
	}
	t := &target{f: f, sectorSize: 512}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", part, err)
	}
	if fi.Mode()&os.ModeDevice == 0 {
		// A regular file the guard allows (tests, images).
		t.size = fi.Size()
		return t, nil
	}
	t.block = true
	size, err := blockdev.IoctlGetUint64(f, unix.BLKGETSIZE64)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("BLKGETSIZE64 %s: %w", part, err)
	}
	t.size = int64(size)
	if t.sectorSize, err = unix.IoctlGetInt(int(f.Fd()), unix.BLKSSZGET); err != nil {
		f.Close()
		return nil, fmt.Errorf("BLKSSZGET %s: %w", part, err)
	}
	return t, nil
}

func (t *target) close(part string) error {
	err := t.f.Sync()
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", part, err)
	}
	return nil
}

// hdGeometry is struct hd_geometry of <linux/hdreg.h>.
type hdGeometry struct {
	heads     uint8
	sectors   uint8
	cylinders uint16
	start     uint64 // unsigned long: 64-bit on the agent's architectures
}

// geometry returns what mkfs.fat 4.2 records of the disk: the heads and
// sectors per track HDIO_GETGEO reports, and the partition's start in
// 512-byte sectors, from sysfs (the kernel's own number, which
// HDIO_GETGEO also gives but loop devices do not implement); zeros for
// what the device does not say.
func (t *target) geometry() hdGeometry {
	var g hdGeometry
	if !t.block {
		return g
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, t.f.Fd(), unix.HDIO_GETGEO, uintptr(unsafe.Pointer(&g))); errno != 0 {
		g = hdGeometry{}
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(t.f.Fd()), &st); err == nil {
		p := fmt.Sprintf("/sys/dev/block/%d:%d/start", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		if n, err := blockdev.ReadSysInt(p); err == nil && n >= 0 {
			g.start = uint64(n)
		}
	}
	return g
}

// Swap makes part a swap area labelled label with a random UUID, as
// `mkswap -L label part` does.
func Swap(ctx context.Context, g *blockdev.Guard, part, label string) error {
	t, err := open(ctx, g, part)
	if err != nil {
		return err
	}
	var uuid [16]byte
	if _, err := rand.Read(uuid[:]); err != nil {
		t.f.Close()
		return fmt.Errorf("swap UUID: %w", err)
	}
	uuid[6] = uuid[6]&0x0f | 0x40 // version 4, random
	uuid[8] = uuid[8]&0x3f | 0x80 // RFC 4122 variant
	if err := WriteSwap(t.f, t.size, os.Getpagesize(), uuid, label); err != nil {
		t.f.Close()
		return fmt.Errorf("swap header on %s: %w", part, err)
	}
	return t.close(part)
}

// FAT makes part an empty FAT filesystem labelled label (ChooseFAT's type
// for its size) with a random volume ID, as `mkfs.vfat -n label part`
// does.
func FAT(ctx context.Context, g *blockdev.Guard, part, label string) error {
	t, err := open(ctx, g, part)
	if err != nil {
		return err
	}
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		t.f.Close()
		return fmt.Errorf("FAT volume ID: %w", err)
	}
	geo := t.geometry()
	o := FATOptions{
		SectorSize:      t.sectorSize,
		Label:           label,
		VolumeID:        binary.LittleEndian.Uint32(id[:]),
		HiddenSectors:   uint32(geo.start * 512 / uint64(t.sectorSize)),
		Heads:           uint16(geo.heads),
		SectorsPerTrack: uint16(geo.sectors),
		Created:         time.Now(),
	}
	if _, err := WriteFAT(t.f, t.size, o); err != nil {
		t.f.Close()
		return fmt.Errorf("FAT filesystem on %s: %w", part, err)
	}
	return t.close(part)
}
