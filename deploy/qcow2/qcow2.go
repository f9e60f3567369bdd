// Package qcow2 reads QEMU copy-on-write (qcow2, versions 2 and 3) disk
// images through an io.ReaderAt and streams their guest contents in guest
// order, so an image can be written to a disk without staging it.
//
// Memory is bounded by the cluster size, not by the image size: one L2
// table, one window of the L1 table, one compressed cluster and one run
// buffer are held at a time. Images this reader cannot reproduce exactly
// are refused up front: backing files, external data files, encryption,
// extended L2 entries and unknown incompatible features.
package qcow2

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Magic starts every qcow2 file.
const Magic = "QFI\xfb"

// Limits from the qcow2 specification and QEMU: clusters of 512 B to
// 2 MiB, an L1 table of at most 32 MiB, virtual sizes below 2^56.
const (
	minClusterBits = 9
	maxClusterBits = 21
	maxL1Bytes     = 32 << 20
	maxVirtualSize = 1 << 56
)

// Incompatible feature bits (qcow2 specification, header bytes 72-79).
const (
	incompatDirty        = 1 << 0
	incompatCorrupt      = 1 << 1
	incompatDataFile     = 1 << 2
	incompatCompression  = 1 << 3
	incompatExtendedL2   = 1 << 4
	knownIncompatFeature = incompatDirty | incompatCorrupt | incompatDataFile | incompatCompression | incompatExtendedL2
)

// Header extension types.
const (
	extEnd            = 0x00000000
	extBackingFormat  = 0xe2792aca
	extFeatureNames   = 0x6803f857
	extBitmaps        = 0x23852875
	extFullDiskCrypto = 0x0537be77
	extDataFile       = 0x44415441
)

// Compression types (header byte 104).
const (
	CompressionZlib = 0
	CompressionZstd = 1
)

const (
	l1OffsetMask    = 0x00fffffffffffe00
	l2OffsetMask    = 0x00fffffffffffe00
	l2Compressed    = 1 << 62
	l2ZeroFlag      = 1
	sectorSize      = 512
	defaultMaxRun   = 4 << 20
	l1WindowEntries = 128 << 10 // 1 MiB of L1 entries per read
)

// ErrUnsupported is wrapped by every refusal of an image that is valid
// qcow2 but cannot be written safely or exactly by this reader.
var ErrUnsupported = errors.New("unsupported qcow2 image")

// ErrCorrupt is wrapped by every error about inconsistent image metadata.
var ErrCorrupt = errors.New("corrupt qcow2 image")

// Header is the decoded qcow2 header with the extensions that matter.
type Header struct {
	Version               uint32
	BackingFileOffset     uint64
	BackingFileSize       uint32
	ClusterBits           uint32
	Size                  uint64 // virtual disk size in bytes
	CryptMethod           uint32
	L1Size                uint32
	L1TableOffset         uint64
	RefcountTableOffset   uint64
	RefcountTableClusters uint32
	NbSnapshots           uint32
	SnapshotsOffset       uint64
	IncompatibleFeatures  uint64
	CompatibleFeatures    uint64
	AutoclearFeatures     uint64
	RefcountOrder         uint32
	HeaderLength          uint32
	CompressionType       uint8
	// DataFile is the external data file name from the header extension.
	DataFile string
	// BackingFormat is the backing file format from the header extension.
	BackingFormat string
	// Encrypted is set when a full disk encryption extension is present.
	Encrypted bool
}

// ClusterSize is the size of one cluster in bytes.
func (h *Header) ClusterSize() int64 { return 1 << h.ClusterBits }

// ParseHeader decodes and checks the header held in b, which should be the
// whole first cluster (header extensions live there). It does not refuse
// unsupported features; Check does.
func ParseHeader(b []byte) (*Header, error) {
	if len(b) < 72 {
		return nil, fmt.Errorf("%w: header needs 72 bytes, have %d", ErrCorrupt, len(b))
	}
	if string(b[:4]) != Magic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrCorrupt, b[:4])
	}
	be := binary.BigEndian
	h := &Header{
		Version:               be.Uint32(b[4:]),
		BackingFileOffset:     be.Uint64(b[8:]),
		BackingFileSize:       be.Uint32(b[16:]),
		ClusterBits:           be.Uint32(b[20:]),
		Size:                  be.Uint64(b[24:]),
		CryptMethod:           be.Uint32(b[32:]),
		L1Size:                be.Uint32(b[36:]),
		L1TableOffset:         be.Uint64(b[40:]),
		RefcountTableOffset:   be.Uint64(b[48:]),
		RefcountTableClusters: be.Uint32(b[56:]),
		NbSnapshots:           be.Uint32(b[60:]),
		SnapshotsOffset:       be.Uint64(b[64:]),
		RefcountOrder:         4,
		HeaderLength:          72,
	}
	switch h.Version {
	case 2:
	case 3:
		if len(b) < 104 {
			return nil, fmt.Errorf("%w: version 3 header needs 104 bytes, have %d", ErrCorrupt, len(b))
		}
		h.IncompatibleFeatures = be.Uint64(b[72:])
		h.CompatibleFeatures = be.Uint64(b[80:])
		h.AutoclearFeatures = be.Uint64(b[88:])
		h.RefcountOrder = be.Uint32(b[96:])
		h.HeaderLength = be.Uint32(b[100:])
		if h.HeaderLength < 104 {
			return nil, fmt.Errorf("%w: header length %d", ErrCorrupt, h.HeaderLength)
		}
		if h.HeaderLength > 104 {
			if len(b) < 105 {
				return nil, fmt.Errorf("%w: header length %d beyond the %d bytes read", ErrCorrupt, h.HeaderLength, len(b))
			}
			h.CompressionType = b[104]
		}
	default:
		return nil, fmt.Errorf("%w: version %d (only 2 and 3 exist)", ErrUnsupported, h.Version)
	}
	if h.ClusterBits < minClusterBits || h.ClusterBits > maxClusterBits {
		return nil, fmt.Errorf("%w: cluster_bits %d outside %d..%d", ErrCorrupt, h.ClusterBits, minClusterBits, maxClusterBits)
	}
	if int64(h.HeaderLength) > h.ClusterSize() {
		return nil, fmt.Errorf("%w: header length %d exceeds the cluster size %d", ErrCorrupt, h.HeaderLength, h.ClusterSize())
	}
	if err := h.parseExtensions(b); err != nil {
		return nil, err
	}
	return h, nil
}

// parseExtensions walks the header extensions that follow the header
// inside the first cluster.
func (h *Header) parseExtensions(b []byte) error {
	end := min(int64(len(b)), h.ClusterSize())
	if h.BackingFileOffset != 0 && h.BackingFileOffset < uint64(end) {
		// The backing file name follows the extensions; they stop there.
		end = int64(h.BackingFileOffset)
	}
	off := int64(h.HeaderLength)
	be := binary.BigEndian
	for off+8 <= end {
		typ := be.Uint32(b[off:])
		n := int64(be.Uint32(b[off+4:]))
		off += 8
		if typ == extEnd {
			return nil
		}
		if n > end-off {
			if end == int64(len(b)) && end < h.ClusterSize() {
				return nil // only part of the header cluster was given
			}
			return fmt.Errorf("%w: header extension 0x%08x of %d bytes runs past the header cluster", ErrCorrupt, typ, n)
		}
		data := b[off : off+n]
		switch typ {
		case extDataFile:
			h.DataFile = string(data)
			if h.DataFile == "" {
				h.DataFile = "(unnamed)"
			}
		case extBackingFormat:
			h.BackingFormat = string(data)
		case extFullDiskCrypto:
			h.Encrypted = true
		case extFeatureNames, extBitmaps:
		}
		off += (n + 7) &^ 7
	}
	if h.BackingFileOffset == 0 && int64(len(b)) >= h.ClusterSize() {
		return fmt.Errorf("%w: header extensions have no end marker", ErrCorrupt)
	}
	return nil
}

// Check refuses images that would need something outside the image (a
// backing file, an external data file), that are encrypted or marked
// corrupt, or that use features this reader does not implement. fileSize is
// the image file's size, or -1 when unknown.
func (h *Header) Check(fileSize int64) error {
	switch {
	case h.BackingFileOffset != 0 || h.BackingFileSize != 0:
		return fmt.Errorf("%w: it has a backing file; images must be self-contained", ErrUnsupported)
	case h.IncompatibleFeatures&incompatDataFile != 0 || h.DataFile != "":
		return fmt.Errorf("%w: it uses an external data file %q; images must be self-contained", ErrUnsupported, h.DataFile)
	case h.CryptMethod != 0 || h.Encrypted:
		return fmt.Errorf("%w: it is encrypted (crypt_method %d)", ErrUnsupported, h.CryptMethod)
	case h.IncompatibleFeatures&incompatCorrupt != 0:
		return fmt.Errorf("%w: the image is marked corrupt", ErrUnsupported)
	case h.IncompatibleFeatures&incompatExtendedL2 != 0:
		return fmt.Errorf("%w: extended L2 entries (subclusters) are not supported", ErrUnsupported)
	case h.IncompatibleFeatures&^knownIncompatFeature != 0:
		return fmt.Errorf("%w: unknown incompatible features 0x%x", ErrUnsupported, h.IncompatibleFeatures&^knownIncompatFeature)
	}
	if h.IncompatibleFeatures&incompatCompression == 0 && h.CompressionType != CompressionZlib {
		return fmt.Errorf("%w: compression type %d without the compression-type feature bit", ErrCorrupt, h.CompressionType)
	}
	if h.CompressionType != CompressionZlib && h.CompressionType != CompressionZstd {
		return fmt.Errorf("%w: compression type %d", ErrUnsupported, h.CompressionType)
	}
	if h.Size > maxVirtualSize {
		return fmt.Errorf("%w: virtual size %d too large", ErrCorrupt, h.Size)
	}
	cs := uint64(h.ClusterSize())
	l2Cover := cs * (cs / 8)
	need := (h.Size + l2Cover - 1) / l2Cover
	if uint64(h.L1Size) < need {
		return fmt.Errorf("%w: L1 table has %d entries, the virtual size %d needs %d", ErrCorrupt, h.L1Size, h.Size, need)
	}
	if uint64(h.L1Size)*8 > maxL1Bytes {
		return fmt.Errorf("%w: L1 table of %d entries exceeds %d bytes", ErrCorrupt, h.L1Size, maxL1Bytes)
	}
	if need > 0 {
		if h.L1TableOffset%cs != 0 || h.L1TableOffset == 0 {
			return fmt.Errorf("%w: L1 table offset 0x%x not cluster aligned", ErrCorrupt, h.L1TableOffset)
		}
		if fileSize >= 0 && h.L1TableOffset+need*8 > uint64(fileSize) {
			return fmt.Errorf("%w: L1 table at 0x%x runs past the end of the %d-byte file", ErrCorrupt, h.L1TableOffset, fileSize)
		}
	}
	return nil
}

// Sink receives the guest disk contents in order: Write for data and
// WriteZeros for runs of zeros that need not be transferred.
type Sink interface {
	Write(p []byte) (int, error)
	WriteZeros(n int64) error
}

// Image is an opened qcow2 image.
type Image struct {
	Header   *Header
	r        io.ReaderAt
	fileSize int64
	// MaxRun bounds one read of contiguous data clusters, and so the
	// memory Convert holds for data.
	MaxRun int
}

// Open reads and checks the header of the qcow2 image in r. fileSize is the
// file's size, or -1 when unknown (then offsets are checked by reads).
func Open(r io.ReaderAt, fileSize int64) (*Image, error) {
	first := make([]byte, 512)
	n, err := r.ReadAt(first, 0)
	if n < 104 && err != nil {
		return nil, fmt.Errorf("reading qcow2 header: %w", err)
	}
	first = first[:n]
	h, err := ParseHeader(first)
	if err != nil {
		return nil, err
	}
	// Header extensions may fill the rest of the first cluster.
	cluster := make([]byte, h.ClusterSize())
	if fileSize >= 0 && fileSize < int64(len(cluster)) {
		cluster = cluster[:fileSize]
	}
	n, err = r.ReadAt(cluster, 0)
	if n < len(cluster) && err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading qcow2 header cluster: %w", err)
	}
	if h, err = ParseHeader(cluster[:n]); err != nil {
		return nil, err
	}
	if err := h.Check(fileSize); err != nil {
		return nil, err
	}
	return &Image{Header: h, r: r, fileSize: fileSize, MaxRun: defaultMaxRun}, nil
}

// converter holds the per-Convert state: buffers sized by the cluster size.
type converter struct {
	ctx      context.Context
	img      *Image
	sink     Sink
	cs       int64
	l1       []uint64 // current window of L1 entries
	l1Start  int64    // index of l1[0]
	l2       []byte
	run      []byte // pending data run, read when flushed
	runHost  int64
	runLen   int64
	zeros    int64 // pending zero run
	cbuf     []byte
	cluster  []byte
	inflater io.ReadCloser
	zdec     *zstd.Decoder
}

// Convert streams the guest disk, Header.Size bytes, into sink in order.
// Unallocated and zero clusters become WriteZeros calls; contiguous data
// clusters are read with one ReadAt of at most MaxRun bytes.
func (img *Image) Convert(ctx context.Context, sink Sink) error {
	h := img.Header
	cs := h.ClusterSize()
	maxRun := max(int64(img.MaxRun), cs)
	c := &converter{ctx: ctx, img: img, sink: sink, cs: cs, l2: make([]byte, cs), run: make([]byte, maxRun)}
	if h.CompressionType == CompressionZstd {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(uint64(4*cs)))
		if err != nil {
			return err
		}
		defer d.Close()
		c.zdec = d
	}
	defer func() {
		if c.inflater != nil {
			c.inflater.Close()
		}
	}()
	l2Cover := cs * (cs / 8)
	size := int64(h.Size)
	nL1 := (size + l2Cover - 1) / l2Cover
	for i := range nL1 {
		if err := ctx.Err(); err != nil {
			return err
		}
		base := i * l2Cover
		span := min(l2Cover, size-base)
		e, err := c.l1Entry(i)
		if err != nil {
			return err
		}
		l2Off := int64(e & l1OffsetMask)
		if l2Off == 0 {
			if err := c.zero(span); err != nil {
				return err
			}
			continue
		}
		if l2Off%cs != 0 {
			return fmt.Errorf("%w: L1 entry %d points at unaligned L2 table 0x%x", ErrCorrupt, i, l2Off)
		}
		// Pending data lies before this L2 table in typical images; read
		// it first so a sequential source never has to go back.
		if err := c.flushData(); err != nil {
			return err
		}
		if err := c.readAt(c.l2, l2Off, "L2 table"); err != nil {
			return err
		}
		if err := c.walkL2(base, span); err != nil {
			return err
		}
	}
	if err := c.flushData(); err != nil {
		return err
	}
	return c.flushZeros()
}

// l1Entry returns L1 entry i, reading the table one window at a time so a
// huge L1 table never sits in memory whole.
func (c *converter) l1Entry(i int64) (uint64, error) {
	if i < c.l1Start || i >= c.l1Start+int64(len(c.l1)) {
		h := c.img.Header
		n := min(int64(l1WindowEntries), int64(h.L1Size)-i)
		buf := make([]byte, n*8)
		if err := c.readAt(buf, int64(h.L1TableOffset)+i*8, "L1 table"); err != nil {
			return 0, err
		}
		if cap(c.l1) < int(n) {
			c.l1 = make([]uint64, n)
		}
		c.l1 = c.l1[:n]
		for k := range c.l1 {
			c.l1[k] = binary.BigEndian.Uint64(buf[k*8:])
		}
		c.l1Start = i
	}
	return c.l1[i-c.l1Start], nil
}

func (c *converter) walkL2(base, span int64) error {
	h := c.img.Header
	cs := c.cs
	n := (span + cs - 1) / cs
	for j := range n {
		if j%256 == 0 {
			if err := c.ctx.Err(); err != nil {
				return err
			}
		}
		e := binary.BigEndian.Uint64(c.l2[j*8:])
		length := min(cs, span-j*cs)
		guest := base + j*cs
		if e&l2Compressed != 0 {
			if err := c.flushData(); err != nil {
				return err
			}
			if err := c.compressed(e, guest, length); err != nil {
				return err
			}
			continue
		}
		host := int64(e & l2OffsetMask)
		if (h.Version >= 3 && e&l2ZeroFlag != 0) || host == 0 {
			if err := c.flushData(); err != nil {
				return err
			}
			if err := c.zero(length); err != nil {
				return err
			}
			continue
		}
		if host%cs != 0 {
			return fmt.Errorf("%w: L2 entry for guest offset 0x%x points at unaligned cluster 0x%x", ErrCorrupt, guest, host)
		}
		if c.img.fileSize >= 0 && host+length > c.img.fileSize {
			return fmt.Errorf("%w: cluster for guest offset 0x%x at 0x%x lies past the end of the %d-byte file", ErrCorrupt, guest, host, c.img.fileSize)
		}
		if c.runLen > 0 && (c.runHost+c.runLen != host || c.runLen+length > int64(len(c.run))) {
			if err := c.flushData(); err != nil {
				return err
			}
		}
		if c.runLen == 0 {
			if err := c.flushZeros(); err != nil {
				return err
			}
			c.runHost = host
		}
		c.runLen += length
	}
	return nil
}

func (c *converter) zero(n int64) error {
	c.zeros += n
	return nil
}

func (c *converter) flushZeros() error {
	if c.zeros == 0 {
		return nil
	}
	n := c.zeros
	c.zeros = 0
	return c.sink.WriteZeros(n)
}

func (c *converter) flushData() error {
	if c.runLen == 0 {
		return nil
	}
	buf := c.run[:c.runLen]
	c.runLen = 0
	if err := c.readAt(buf, c.runHost, "data clusters"); err != nil {
		return err
	}
	_, err := c.sink.Write(buf)
	return err
}

// compressed decodes one compressed cluster. The descriptor gives the host
// offset and a count of 512-byte sectors; the data may end anywhere in the
// last one, so the read may include bytes of the next cluster.
func (c *converter) compressed(e uint64, guest, length int64) error {
	h := c.img.Header
	x := 62 - (h.ClusterBits - 8)
	host := int64(e & (1<<x - 1))
	sectors := int64((e >> x) & (1<<(62-x) - 1))
	clen := (sectors+1)*sectorSize - host%sectorSize
	if host == 0 || clen > 2*c.cs {
		return fmt.Errorf("%w: compressed cluster for guest offset 0x%x: host 0x%x, %d bytes", ErrCorrupt, guest, host, clen)
	}
	if c.img.fileSize >= 0 {
		if host >= c.img.fileSize {
			return fmt.Errorf("%w: compressed cluster for guest offset 0x%x at 0x%x lies past the end of the %d-byte file", ErrCorrupt, guest, host, c.img.fileSize)
		}
		clen = min(clen, c.img.fileSize-host)
	}
	if c.cbuf == nil {
		c.cbuf = make([]byte, 2*c.cs)
		c.cluster = make([]byte, c.cs)
	}
	cbuf := c.cbuf[:clen]
	if err := c.readAtShortOK(cbuf, host, "compressed cluster"); err != nil {
		return err
	}
	var dec io.Reader
	switch h.CompressionType {
	case CompressionZstd:
		if err := c.zdec.Reset(bytes.NewReader(cbuf)); err != nil {
			return fmt.Errorf("%w: zstd cluster for guest offset 0x%x: %v", ErrCorrupt, guest, err)
		}
		dec = c.zdec
	default:
		if c.inflater == nil {
			c.inflater = flate.NewReader(bytes.NewReader(cbuf))
		} else if err := c.inflater.(flate.Resetter).Reset(bytes.NewReader(cbuf), nil); err != nil {
			return err
		}
		dec = c.inflater
	}
	if _, err := io.ReadFull(dec, c.cluster); err != nil {
		return fmt.Errorf("%w: decompressing the cluster for guest offset 0x%x at 0x%x: %v", ErrCorrupt, guest, host, err)
	}
	if err := c.flushZeros(); err != nil {
		return err
	}
	_, err := c.sink.Write(c.cluster[:length])
	return err
}

func (c *converter) readAt(p []byte, off int64, what string) error {
	n, err := c.img.r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s at 0x%x: file ends after %d of %d bytes", ErrCorrupt, what, off, n, len(p))
	}
	return fmt.Errorf("reading %s at 0x%x: %w", what, off, err)
}

// readAtShortOK is readAt for compressed clusters, whose size is an upper
// bound that may reach past the end of the file.
func (c *converter) readAtShortOK(p []byte, off int64, what string) error {
	n, err := c.img.r.ReadAt(p, off)
	if n == len(p) || (n > 0 && errors.Is(err, io.EOF)) {
		clear(p[n:])
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s at 0x%x: file ends after %d of %d bytes", ErrCorrupt, what, off, n, len(p))
	}
	return fmt.Errorf("reading %s at 0x%x: %w", what, off, err)
}
