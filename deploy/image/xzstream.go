package image

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"

	"github.com/ulikunitz/xz/lzma"
)

// xzMaxDict bounds the LZMA2 dictionary an xz image may declare. The
// decoder keeps a dictionary-sized ring buffer resident, and xz -9 uses
// 64 MiB; ulikunitz/xz's own reader takes its DictCap as a floor and
// allocates whatever a block header asks for (up to 1.5 GiB), so the xz
// container is read here and only the LZMA2 payload is handed to the
// library, with the dictionary checked first.
const xzMaxDict = 64 << 20

var xzStreamMagic = []byte{0xfd, '7', 'z', 'X', 'Z', 0}

// xzReader decodes an xz file (one or more concatenated streams, any number
// of blocks, LZMA2 filter only, as xz(1) writes) block by block, verifying
// each block's check.
type xzReader struct {
	in      *xzInput
	maxDict int64
	check   byte
	block   io.Reader // current block's LZMA2 reader, nil between blocks
	sum     hash.Hash // current block's check, nil for check type none
	blockAt int64     // offset of the current block header
	done    bool
}

// xzInput counts the bytes the LZMA2 decoder consumes, which the
// block padding depends on; it is an io.ByteReader so the decoder reads
// from it byte-exactly and never past the end of a block.
type xzInput struct {
	r *bufio.Reader
	n int64
}

func (c *xzInput) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *xzInput) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

func (c *xzInput) full(n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(c, b)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return b, err
}

func newXZReader(r io.Reader, maxDict int64) (*xzReader, error) {
	x := &xzReader{in: &xzInput{r: bufio.NewReaderSize(r, 64<<10)}, maxDict: maxDict}
	if err := x.streamHeader(); err != nil {
		return nil, err
	}
	return x, nil
}

func xzErr(at int64, format string, a ...any) error {
	return fmt.Errorf("xz image: at byte %d: %s", at, fmt.Sprintf(format, a...))
}

func (x *xzReader) streamHeader() error {
	at := x.in.n
	h, err := x.in.full(12)
	if err != nil {
		return xzErr(at, "stream header: %v", err)
	}
	if !bytes.Equal(h[:6], xzStreamMagic) {
		return xzErr(at, "no xz stream header")
	}
	if crc32.ChecksumIEEE(h[6:8]) != binary.LittleEndian.Uint32(h[8:]) {
		return xzErr(at, "stream header CRC32 does not match")
	}
	if h[6] != 0 || h[7]&0xf0 != 0 {
		return xzErr(at, "unsupported stream flags %#02x%02x", h[6], h[7])
	}
	x.check = h[7] & 0x0f
	switch x.check {
	case 0, 1, 4, 10:
	default:
		return xzErr(at, "unsupported check type %d", x.check)
	}
	return nil
}

func (x *xzReader) Read(p []byte) (int, error) {
	for {
		if x.done {
			return 0, io.EOF
		}
		if x.block == nil {
			if err := x.next(); err != nil {
				return 0, err
			}
			continue
		}
		n, err := x.block.Read(p)
		if x.sum != nil {
			x.sum.Write(p[:n])
		}
		if errors.Is(err, io.EOF) {
			if err := x.endBlock(); err != nil {
				return n, err
			}
			err = nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// next reads what follows a stream header or a block: another block
// header, or the index, the stream footer and then either the end of the
// file or (after stream padding) another stream.
func (x *xzReader) next() error {
	at := x.in.n
	b, err := x.in.ReadByte()
	if err != nil {
		return xzErr(at, "block header or index: %v", io.ErrUnexpectedEOF)
	}
	if b == 0 {
		return x.indexAndFooter(at)
	}
	size := (int(b) + 1) * 4
	rest, err := x.in.full(size - 1)
	if err != nil {
		return xzErr(at, "block header: %v", err)
	}
	hdr := append([]byte{b}, rest...)
	if crc32.ChecksumIEEE(hdr[:size-4]) != binary.LittleEndian.Uint32(hdr[size-4:]) {
		return xzErr(at, "block header CRC32 does not match")
	}
	flags := hdr[1]
	if flags&0x3c != 0 {
		return xzErr(at, "reserved block flags set (%#02x)", flags)
	}
	body := bytes.NewReader(hdr[2 : size-4])
	if flags&0x40 != 0 {
		if _, err := binary.ReadUvarint(body); err != nil {
			return xzErr(at, "block compressed size: %v", err)
		}
	}
	if flags&0x80 != 0 {
		if _, err := binary.ReadUvarint(body); err != nil {
			return xzErr(at, "block uncompressed size: %v", err)
		}
	}
	if n := int(flags&3) + 1; n != 1 {
		return xzErr(at, "%d filters in a block; only LZMA2 alone is supported", n)
	}
	id, err := binary.ReadUvarint(body)
	if err != nil {
		return xzErr(at, "filter id: %v", err)
	}
	psize, err := binary.ReadUvarint(body)
	if err != nil {
		return xzErr(at, "filter properties size: %v", err)
	}
	if id != 0x21 || psize != 1 {
		return xzErr(at, "filter %#x with %d property bytes; only LZMA2 (0x21) is supported", id, psize)
	}
	prop, err := body.ReadByte()
	if err != nil {
		return xzErr(at, "LZMA2 properties: %v", err)
	}
	dict, err := lzma.DecodeDictCap(prop)
	if err != nil {
		return xzErr(at, "LZMA2 dictionary: %v", err)
	}
	if dict > x.maxDict {
		return xzErr(at, "block declares a %d MiB LZMA2 dictionary; more than %d MiB is refused (the agent keeps the dictionary in memory)", dict>>20, x.maxDict>>20)
	}
	for body.Len() > 0 {
		if c, _ := body.ReadByte(); c != 0 {
			return xzErr(at, "block header padding is not zero")
		}
	}
	dict = max(dict, lzma.MinDictCap)
	br, err := lzma.Reader2Config{DictCap: int(dict)}.NewReader2(x.in)
	if err != nil {
		return xzErr(at, "LZMA2: %v", err)
	}
	x.block, x.blockAt = br, at
	switch x.check {
	case 1:
		x.sum = crc32.NewIEEE()
	case 4:
		x.sum = crc64.New(crc64.MakeTable(crc64.ECMA))
	case 10:
		x.sum = sha256.New()
	default:
		x.sum = nil
	}
	return nil
}

func (x *xzReader) endBlock() error {
	x.block = nil
	if pad := (4 - (x.in.n-x.blockAt)%4) % 4; pad > 0 {
		p, err := x.in.full(int(pad))
		if err != nil {
			return xzErr(x.in.n, "block padding: %v", err)
		}
		if !bytes.Equal(p, make([]byte, pad)) {
			return xzErr(x.in.n, "block padding is not zero")
		}
	}
	if x.sum == nil {
		return nil
	}
	at := x.in.n
	want, err := x.in.full(x.sum.Size())
	if err != nil {
		return xzErr(at, "block check: %v", err)
	}
	got := x.sum.Sum(nil)
	if x.check != 10 { // CRC32 and CRC64 are stored little-endian
		for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
			got[i], got[j] = got[j], got[i]
		}
	}
	if !bytes.Equal(got, want) {
		return xzErr(at, "block check does not match the decompressed data (corrupt image)")
	}
	return nil
}

// indexAndFooter skips the index (its indicator byte at at was read), checks
// the stream footer, and looks for stream padding and another stream.
func (x *xzReader) indexAndFooter(at int64) error {
	n, err := binary.ReadUvarint(x.in)
	if err != nil {
		return xzErr(at, "index: %v", err)
	}
	if n > 1<<40 {
		return xzErr(at, "index claims %d records", n)
	}
	for i := uint64(0); i < 2*n; i++ {
		if _, err := binary.ReadUvarint(x.in); err != nil {
			return xzErr(at, "index record: %v", err)
		}
	}
	if pad := (4 - (x.in.n-at)%4) % 4; pad > 0 {
		if _, err := x.in.full(int(pad)); err != nil {
			return xzErr(at, "index padding: %v", err)
		}
	}
	if _, err := x.in.full(4); err != nil { // index CRC32
		return xzErr(at, "index CRC32: %v", err)
	}
	fat := x.in.n
	f, err := x.in.full(12)
	if err != nil {
		return xzErr(fat, "stream footer: %v", err)
	}
	if f[10] != 'Y' || f[11] != 'Z' {
		return xzErr(fat, "no stream footer")
	}
	if f[9]&0x0f != x.check {
		return xzErr(fat, "stream footer's check type differs from the header's")
	}
	// Stream padding (multiples of four zero bytes), then EOF or a stream.
	for {
		b, err := x.in.r.Peek(4)
		if len(b) == 0 && errors.Is(err, io.EOF) {
			x.done = true
			return nil
		}
		if len(b) < 4 {
			return xzErr(x.in.n, "trailing garbage after the stream")
		}
		if bytes.Equal(b, []byte{0, 0, 0, 0}) {
			if _, err := x.in.full(4); err != nil {
				return err
			}
			continue
		}
		if m, _ := x.in.r.Peek(len(xzStreamMagic)); !bytes.Equal(m, xzStreamMagic) {
			return xzErr(x.in.n, "trailing garbage after the stream")
		}
		return x.streamHeader()
	}
}
