package partition

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"golang.org/x/sys/unix"
)

// isoMaxSector is the largest logical sector size Linux mounts ISO9660
// on; beyond it (4Kn disks) IPA master rebuilds the config drive as FAT.
const isoMaxSector = 2048

// rebuildConfigDriveAsFAT32 replaces the ISO on part with a FAT32
// filesystem labelled CONFIG-2 holding the same files, as IPA master's
// _try_build_fat32_config_drive does when the ISO cannot be mounted
// (cloud-init reads either). IPA finds out by a failed test mount; here
// the cause, a logical sector size above 2048 bytes, is checked directly.
func rebuildConfigDriveAsFAT32(g *blockdev.Guard, part string, iso []byte, sector int) error {
	if err := g.Check(part); err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "configdrive-*.iso")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := tmp.Write(iso); err != nil {
		return fmt.Errorf("stage config drive ISO: %w", err)
	}
	src, err := iso9660.Read(file.New(tmp, true), int64(len(iso)), 0, 2048)
	if err != nil {
		return fmt.Errorf("read config drive ISO: %w", err)
	}
	// Clear what a previous config drive (an ISO's descriptors at 32 KiB)
	// left, so nothing but the FAT is found on the partition.
	if _, err := blockdev.WipeMetadata(context.Background(), g, part); err != nil {
		return err
	}
	// go-diskfs writes unaligned, so this handle is not O_DIRECT; it is
	// synced before returning.
	f, err := os.OpenFile(part, os.O_RDWR|unix.O_EXCL, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", part, err)
	}
	defer f.Close()
	size, err := blockdev.IoctlGetUint64(f, unix.BLKGETSIZE64)
	if err != nil {
		return fmt.Errorf("BLKGETSIZE64 %s: %w", part, err)
	}
	dst, err := fat32.Create(file.New(f, false), int64(size), 0, int64(sector), "CONFIG-2", false)
	if err != nil {
		return fmt.Errorf("create FAT32 config drive on %s: %w", part, err)
	}
	err = fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		target := "/" + p
		if d.IsDir() {
			return dst.Mkdir(target)
		}
		in, err := src.OpenFile("/"+p, os.O_RDONLY)
		if err != nil {
			return err
		}
		defer in.Close()
		if dir := path.Dir(target); dir != "/" {
			if err := dst.Mkdir(dir); err != nil {
				return err
			}
		}
		out, err := dst.OpenFile(target, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return err
		}
		defer out.Close()
		_, err = io.Copy(out, in)
		return err
	})
	if err != nil {
		return fmt.Errorf("copy config drive files to FAT32 on %s: %w", part, err)
	}
	if err := fixFAT32DotDot(f); err != nil {
		return fmt.Errorf("fix directory entries of the FAT32 config drive on %s: %w", part, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", part, err)
	}
	return nil
}

// fixFAT32DotDot sets the ".." entry of every directory directly below the
// root to cluster 0, as the FAT specification (and fsck.fat) require;
// go-diskfs writes the root's cluster number there. rw is the FAT32
// volume.
func fixFAT32DotDot(rw interface {
	io.ReaderAt
	io.WriterAt
}) error {
	bs := make([]byte, 512)
	if _, err := rw.ReadAt(bs, 0); err != nil {
		return err
	}
	bps := int64(binary.LittleEndian.Uint16(bs[11:13]))
	spc := int64(bs[13])
	reserved := int64(binary.LittleEndian.Uint16(bs[14:16]))
	nfats := int64(bs[16])
	fatSize := int64(binary.LittleEndian.Uint32(bs[36:40]))
	root := binary.LittleEndian.Uint32(bs[44:48])
	if bps == 0 || spc == 0 || fatSize == 0 || root < 2 {
		return fmt.Errorf("not a FAT32 boot sector (bps %d, spc %d, fat size %d, root cluster %d)", bps, spc, fatSize, root)
	}
	clusterBytes := bps * spc
	dataStart := (reserved + nfats*fatSize) * bps
	clusterOff := func(c uint32) int64 { return dataStart + int64(c-2)*clusterBytes }
	next := func(c uint32) (uint32, error) {
		b := make([]byte, 4)
		if _, err := rw.ReadAt(b, reserved*bps+int64(c)*4); err != nil {
			return 0, err
		}
		return binary.LittleEndian.Uint32(b) & 0x0fffffff, nil
	}
	buf := make([]byte, clusterBytes)
	for c, hops := root, 0; c >= 2 && c < 0x0ffffff8 && hops < 1<<16; hops++ {
		if _, err := rw.ReadAt(buf, clusterOff(c)); err != nil {
			return err
		}
		for off := 0; off+32 <= len(buf); off += 32 {
			e := buf[off : off+32]
			if e[0] == 0 {
				return nil // end of directory
			}
			if e[0] == 0xE5 || e[11] == 0x0F || e[11]&0x10 == 0 || e[0] == '.' {
				continue
			}
			sub := uint32(binary.LittleEndian.Uint16(e[20:22]))<<16 | uint32(binary.LittleEndian.Uint16(e[26:28]))
			if sub < 2 {
				continue
			}
			dot := make([]byte, 64)
			if _, err := rw.ReadAt(dot, clusterOff(sub)); err != nil {
				return err
			}
			dd := dot[32:64]
			if string(dd[0:2]) == ".." && (binary.LittleEndian.Uint16(dd[20:22]) != 0 || binary.LittleEndian.Uint16(dd[26:28]) != 0) {
				clear(dd[20:22])
				clear(dd[26:28])
				if _, err := rw.WriteAt(dd, clusterOff(sub)+32); err != nil {
					return err
				}
			}
		}
		var err error
		if c, err = next(c); err != nil {
			return err
		}
	}
	return nil
}
