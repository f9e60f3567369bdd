package partition

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/clock"
)

// Config drive for whole-disk images (IPA's create_config_drive_partition,
// section 8.5 of the protocol notes): the ISO9660 image labelled config-2
// is written to a partition at the end of the disk, an existing config-2
// partition being reused.

// MaxConfigDriveSize is the largest config drive IPA writes for whole-disk
// images (64 MiB) and the size of the partition it creates.
const MaxConfigDriveSize = 64 * blockdev.MiB

// maxConfigDriveDownload bounds what is read from a config drive URL: the
// base64 of a gzip of a 64 MiB ISO, with room to spare.
const maxConfigDriveDownload = 128 * blockdev.MiB

// mbrLimitMiB is the 2 TiB an MBR can address with 512-byte sectors.
const mbrLimitMiB = 2 * 1024 * 1024

// LoadConfigDrive turns the configdrive parameter into ISO bytes: an
// http(s) URL is downloaded with client (a status >= 400 fails); the
// content, given or downloaded, is base64 of a gzipped ISO. Downloaded
// content that is not base64 is used as the raw image, as IPA does.
func LoadConfigDrive(ctx context.Context, client *http.Client, configdrive string) ([]byte, error) {
	return loadConfigDrive(ctx, client, configdrive, MaxConfigDriveSize)
}

func loadConfigDrive(ctx context.Context, client *http.Client, configdrive string, limit int) ([]byte, error) {
	var data []byte
	downloaded := false
	if strings.HasPrefix(configdrive, "http://") || strings.HasPrefix(configdrive, "https://") {
		body, err := downloadConfigDrive(ctx, client, configdrive)
		if err != nil {
			return nil, err
		}
		data, downloaded = body, true
	} else {
		data = []byte(configdrive)
	}
	if downloaded && !looksLikeBase64(data) {
		// A raw image served as is (IPA: "not base64 encoded, assuming
		// binary"). Deciding by content rather than by a failed decode
		// keeps binary data that happens to decode from being mistaken.
		if len(data) > limit {
			return nil, fmt.Errorf("config drive from %s is %d bytes, more than the %d MiB limit", configdrive, len(data), limit/blockdev.MiB)
		}
		return data, nil
	}
	decoded, err := lenientBase64(data)
	if err != nil {
		return nil, fmt.Errorf("config drive is not base64 encoded or the content is malformed: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(decoded))
	if err != nil {
		return nil, fmt.Errorf("config drive is not gzip compressed: %w", err)
	}
	iso, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("decompressing config drive: %w", err)
	}
	if len(iso) > limit {
		return nil, fmt.Errorf("config drive size exceeds the maximum of %d MiB", limit/blockdev.MiB)
	}
	return iso, nil
}

func downloadConfigDrive(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("config drive URL %q: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("can't download the config drive from %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("can't download the config drive from %s: HTTP status %d, response body %q", url, resp.StatusCode, snippet)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxConfigDriveDownload+1))
	if err != nil {
		return nil, fmt.Errorf("download config drive from %s: %w", url, err)
	}
	if len(body) > maxConfigDriveDownload {
		return nil, fmt.Errorf("config drive at %s is larger than %d MiB", url, maxConfigDriveDownload/blockdev.MiB)
	}
	return body, nil
}

// looksLikeBase64 reports whether data holds only base64 characters and
// whitespace.
func looksLikeBase64(data []byte) bool {
	for _, c := range data {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=' ||
			c == '\n' || c == '\r' || c == ' ' || c == '\t') {
			return false
		}
	}
	return true
}

// lenientBase64 decodes like Python's base64.b64decode without validate:
// characters outside the alphabet (newlines, spaces) are dropped first.
func lenientBase64(data []byte) ([]byte, error) {
	clean := make([]byte, 0, len(data))
	for _, c := range data {
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=' {
			clean = append(clean, c)
		}
	}
	if len(clean) == 0 {
		return nil, errors.New("no base64 data")
	}
	if i := bytes.IndexByte(clean, '='); i >= 0 {
		// Anything after the padding is ignored by Python's decoder.
		end := i
		for end < len(clean) && clean[end] == '=' {
			end++
		}
		clean = clean[:end]
	}
	out, err := base64.StdEncoding.DecodeString(string(clean))
	if err != nil {
		out, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(string(clean), "="))
	}
	return out, err
}

// ConfigDriveResult says where the config drive went.
type ConfigDriveResult struct {
	Partition string // device path of the config-2 partition
	Number    int    // partition number
	Reused    bool   // an existing config-2 partition was overwritten
	// FAT32 is set when the ISO was rebuilt as a FAT32 filesystem labelled
	// CONFIG-2 because the disk's sectors are too large for ISO9660.
	FAT32 bool
}

// WriteConfigDrive writes iso to the config-2 partition of dev, creating
// one of 64 MiB at the end of the disk when none exists (GPT: after moving
// the backup table to the real end of the disk, as IPA's fix_gpt_partition
// does; MBR: in a free primary slot, below 2 TiB).
func WriteConfigDrive(ctx context.Context, g *blockdev.Guard, dev string, iso []byte) (ConfigDriveResult, error) {
	if len(iso) > MaxConfigDriveSize {
		return ConfigDriveResult{}, fmt.Errorf("config drive size exceeds the maximum of %d MiB: %d bytes", MaxConfigDriveSize/blockdev.MiB, len(iso))
	}
	if err := g.Check(dev); err != nil {
		return ConfigDriveResult{}, err
	}
	bd, err := blockdev.Open(g, dev)
	if err != nil {
		return ConfigDriveResult{}, err
	}
	size, sector := bd.Size, bd.SectorSize
	bd.Close()

	existing, err := findConfigDrivePartition(dev, sector)
	if err != nil {
		return ConfigDriveResult{}, err
	}
	res := ConfigDriveResult{Number: existing, Reused: existing > 0}
	if existing == 0 {
		if res.Number, err = createConfigDrivePartition(ctx, dev, size, sector); err != nil {
			return ConfigDriveResult{}, err
		}
	}
	res.Partition = blockdev.PartitionPath(dev, res.Number)
	if err := kernelKnowsPartition(dev, res.Number, sector); err != nil {
		return res, err
	}
	if err := waitForDevice(ctx, res.Partition); err != nil {
		return res, err
	}
	if sector > isoMaxSector {
		if err := rebuildConfigDriveAsFAT32(g, res.Partition, iso, sector); err != nil {
			return res, err
		}
		res.FAT32 = true
		return res, nil
	}
	if err := writeImageToPartition(g, res.Partition, iso); err != nil {
		return res, err
	}
	return res, nil
}

// kernelKnowsPartition adds partition n of dev to the kernel's view with
// BLKPG when the table re-read did not.
func kernelKnowsPartition(dev string, n, sector int) error {
	t, err := blockdev.ReadPartTable(dev, sector)
	if err != nil {
		return err
	}
	for _, p := range t.Partitions {
		if p.Number != n {
			continue
		}
		start, length := p.Start, p.Size
		if t.Kind == "dos" {
			start, length = p.Start/512*int64(sector), p.Size/512*int64(sector)
		}
		f, err := os.Open(dev)
		if err != nil {
			return err
		}
		defer f.Close()
		sys, err := blockdev.SysBlockDir("/", dev)
		if err != nil {
			return err
		}
		return blockdev.EnsurePartition(f, blockdev.ResolveLink(sys), filepath.Base(blockdev.PartitionPath(dev, n)), n, start, length)
	}
	return fmt.Errorf("partition %d not found in the table of %s after writing it", n, dev)
}

// findConfigDrivePartition returns the number of the partition whose
// filesystem label is config-2 (any case), 0 if none; two are an error.
func findConfigDrivePartition(dev string, sector int) (int, error) {
	t, err := blockdev.ReadPartTable(dev, sector)
	if err != nil {
		return 0, err
	}
	f, err := os.Open(dev)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var found []int
	for _, p := range t.Partitions {
		if p.Size <= 0 || (t.Kind == "dos" && (p.MBRType == 0x05 || p.MBRType == 0x0f || p.MBRType == 0x85)) {
			continue
		}
		head := make([]byte, 36*1024)
		start := p.Start
		if t.Kind == "dos" {
			start = p.Start / 512 * int64(sector) // MBR LBAs are logical sectors
		}
		n, _ := f.ReadAt(head, start)
		head = head[:n]
		label := blockdev.ISOVolumeID(head)
		if label == "" {
			label = blockdev.FATLabel(head)
		}
		if strings.EqualFold(label, "config-2") {
			found = append(found, p.Number)
		}
	}
	switch len(found) {
	case 0:
		return 0, nil
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("more than one config drive (config-2) partition found on %s: partitions %v", dev, found)
}

// createConfigDrivePartition adds the partition with go-diskfs and makes
// the kernel see it; it returns the partition number.
func createConfigDrivePartition(ctx context.Context, dev string, size int64, sector int) (int, error) {
	d, err := openForPartitioning(dev, size, sector)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	table, err := d.GetPartitionTable()
	if err != nil {
		return 0, fmt.Errorf("no partition table on %s to add a config drive to: %w", dev, err)
	}
	var number int
	switch t := table.(type) {
	case *gpt.Table:
		number, err = addGPTConfigDrive(t, size, sector)
	case *mbr.Table:
		number, err = addMBRConfigDrive(t, size, sector)
	default:
		err = fmt.Errorf("unsupported partition table type %s", table.Type())
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", dev, err)
	}
	if blockdev.IsMultipathMap(dev) {
		// d.partition's re-read (BLKRRPART) fails on a map, which the
		// kernel does not partition: its partition maps are made instead.
		f, err := writeTable(d, table, dev, size)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return 0, fmt.Errorf("sync %s: %w", dev, err)
		}
		return number, blockdev.RereadPartitions(ctx, f)
	}
	if err := d.partition(table); err != nil {
		// Includes EBUSY: the table is on disk but the kernel kept the
		// old one, so the partition cannot be written.
		return 0, fmt.Errorf("write partition table of %s: %w", dev, err)
	}
	return number, nil
}

func addGPTConfigDrive(t *gpt.Table, size int64, sector int) (int, error) {
	// The image may have been smaller than the disk: move the backup
	// header and the last usable sector to the real end first.
	t.Resize(uint64(size))
	s := uint64(sector)
	last := t.LastDataSector()
	align := uint64(blockdev.MiB) / s
	want := uint64(MaxConfigDriveSize) / s
	if last+1 < want {
		return 0, errors.New("disk too small for a config drive partition")
	}
	start := (last + 1 - want) / align * align
	used := make(map[int]bool)
	for _, p := range t.Partitions {
		if p.Type == gpt.Unused {
			continue
		}
		used[p.Index] = true
		if p.End >= start {
			return 0, fmt.Errorf("no room for a %d MiB config drive at the end of the disk: partition %d ends at sector %d, past sector %d",
				MaxConfigDriveSize/blockdev.MiB, p.Index, p.End, start)
		}
	}
	number := 1
	for used[number] {
		number++
	}
	var guid [16]byte
	if _, err := rand.Read(guid[:]); err != nil {
		return 0, err
	}
	guid[6] = guid[6]&0x0f | 0x40 // version 4
	guid[8] = guid[8]&0x3f | 0x80 // RFC 4122 variant
	p := &gpt.Partition{
		Index: number,
		Start: start,
		End:   last,
		Size:  (last - start + 1) * s,
		// sgdisk's default type, as IPA creates it.
		Type: gpt.LinuxFilesystem,
		GUID: fmt.Sprintf("%x-%x-%x-%x-%x", guid[0:4], guid[4:6], guid[6:8], guid[8:10], guid[10:16]),
	}
	// go-diskfs places entries by Index.
	t.Partitions = append(t.Partitions, p)
	return number, nil
}

func addMBRConfigDrive(t *mbr.Table, size int64, sector int) (int, error) {
	s := int64(sector)
	free, count := 0, 0
	slots := make([]*mbr.Partition, 4)
	for _, p := range t.Partitions {
		if p != nil && p.Type != mbr.Empty && p.Index >= 1 && p.Index <= 4 {
			slots[p.Index-1] = p
			count++
		}
	}
	if count > 3 {
		return 0, fmt.Errorf("config drive cannot be created: the disk uses MBR partitioning and already has %d primary partitions", count)
	}
	for i := range slots {
		if slots[i] == nil {
			free = i + 1
			break
		}
	}
	endMiB := size / blockdev.MiB
	if endMiB > mbrLimitMiB {
		// Beyond 2 TiB an MBR cannot address the end: IPA puts the config
		// drive just below the limit.
		endMiB = mbrLimitMiB - 1
	}
	startByte := (endMiB - MaxConfigDriveSize/blockdev.MiB) * blockdev.MiB
	endByte := endMiB * blockdev.MiB
	if endByte > size {
		endByte = size
	}
	start, length := startByte/s, (endByte-startByte)/s
	for _, p := range slots {
		if p != nil && int64(p.Start)+int64(p.Size) > start {
			return 0, fmt.Errorf("no room for a %d MiB config drive at the end of the disk: partition %d ends at sector %d, past sector %d",
				MaxConfigDriveSize/blockdev.MiB, p.Index, int64(p.Start)+int64(p.Size), start)
		}
	}
	if start+length > 1<<32 {
		return 0, errors.New("config drive position exceeds what MBR can address")
	}
	slots[free-1] = &mbr.Partition{Index: free, Type: mbr.Fat32LBA, Start: uint32(start), Size: uint32(length)}
	var parts []*mbr.Partition
	for i, p := range slots {
		if p == nil {
			p = &mbr.Partition{Index: i + 1, Type: mbr.Empty}
		}
		parts = append(parts, p)
	}
	t.Partitions = parts
	return free, nil
}

// waitForDevice waits for a partition node (devtmpfs or udev create it
// right after the table re-read, but not synchronously).
func waitForDevice(ctx context.Context, path string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("partition %s did not appear after the partition table was re-read", path)
		}
		if clock.Sleep(ctx, 100*time.Millisecond) != nil {
			return ctx.Err()
		}
	}
}

// writeImageToPartition writes img at the start of part with direct I/O,
// padded to whole sectors, syncs, and reads it back to verify.
func writeImageToPartition(g *blockdev.Guard, part string, img []byte) error {
	d, err := blockdev.Open(g, part)
	if err != nil {
		return err
	}
	defer d.Close()
	if int64(len(img)) > d.Size {
		return fmt.Errorf("config drive of %d bytes does not fit partition %s of %d bytes", len(img), part, d.Size)
	}
	n := (len(img) + d.SectorSize - 1) / d.SectorSize * d.SectorSize
	buf, free, err := blockdev.AlignedBuffer(max(n, d.SectorSize))
	if err != nil {
		return err
	}
	defer free()
	copy(buf, img)
	if _, err := d.File.WriteAt(buf[:n], 0); err != nil {
		return fmt.Errorf("writing the config drive (%d bytes at offset 0) to %s: %w", n, part, err)
	}
	if err := d.File.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", part, err)
	}
	clear(buf)
	if _, err := d.File.ReadAt(buf[:n], 0); err != nil {
		return fmt.Errorf("reading back the config drive (%d bytes at offset 0) from %s: %w", n, part, err)
	}
	if !bytes.Equal(buf[:len(img)], img) {
		return fmt.Errorf("config drive on %s does not read back as written", part)
	}
	return nil
}

// PartitionUUIDs is what standby.get_partition_uuids reports after a
// whole-disk image was written: {"root uuid": "0x%08x"}, the 32-bit disk
// signature at bytes 440-443 read as a little-endian number (IPA's
// `hexdump -s 440 -n 4 -e '"0x%08x"'`). IPA reads that MBR field on GPT
// disks as well, where it is usually 0x00000000; so does this.
func PartitionUUIDs(dev string) (map[string]any, error) {
	f, err := os.Open(dev)
	if err != nil {
		return nil, fmt.Errorf("get disk identifier: %w", err)
	}
	defer f.Close()
	b := make([]byte, 4)
	if _, err := f.ReadAt(b, 440); err != nil {
		return nil, fmt.Errorf("reading the disk identifier of %s (4 bytes at offset 440): %w", dev, err)
	}
	sig := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
	return map[string]any{"root uuid": fmt.Sprintf("0x%08x", sig)}, nil
}
