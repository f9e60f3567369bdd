package ramdisk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/ulikunitz/xz/lzma"
)

// decodeKernelXZ decompresses the XZ stream of a bzImage payload. The
// kernel's build compresses with the x86 BCJ filter before LZMA2
// (scripts/xz_wrap.sh: --x86 --lzma2), which the XZ package's reader
// rejects, so the one block is read here: its header's filter chain,
// the LZMA2 data through the lzma package, then BCJ decoded in place.
// The caller checks the length against the size the image records.
func decodeKernelXZ(data []byte) ([]byte, error) {
	le := binary.LittleEndian
	if len(data) < 12+8 || !bytes.HasPrefix(data, []byte("\xfd7zXZ\x00")) {
		return nil, errors.New("xz: no stream header")
	}
	if crc32.ChecksumIEEE(data[6:8]) != le.Uint32(data[8:12]) {
		return nil, errors.New("xz: stream header checksum mismatch")
	}
	p := 12
	hs := (int(data[p]) + 1) * 4
	if data[p] == 0 || p+hs > len(data) {
		return nil, errors.New("xz: no block")
	}
	hdr := data[p : p+hs]
	if crc32.ChecksumIEEE(hdr[:hs-4]) != le.Uint32(hdr[hs-4:]) {
		return nil, errors.New("xz: block header checksum mismatch")
	}
	flags := hdr[1]
	if flags&0x3c != 0 {
		return nil, errors.New("xz: reserved block flags set")
	}
	q := 2
	varint := func() (uint64, error) {
		var v uint64
		for i := 0; i < 9 && q < hs-4; i++ {
			b := hdr[q]
			q++
			v |= uint64(b&0x7f) << (7 * i)
			if b&0x80 == 0 {
				return v, nil
			}
		}
		return 0, errors.New("xz: bad block header number")
	}
	for _, bit := range []byte{0x40, 0x80} { // compressed and uncompressed size
		if flags&bit != 0 {
			if _, err := varint(); err != nil {
				return nil, err
			}
		}
	}
	bcj, bcjStart, dictCap := false, uint32(0), 0
	n := int(flags&3) + 1
	for i := range n {
		id, err := varint()
		if err != nil {
			return nil, err
		}
		size, err := varint()
		if err != nil || size > uint64(hs-4-q) {
			return nil, errors.New("xz: bad filter properties")
		}
		props := hdr[q : q+int(size)]
		q += int(size)
		switch {
		case id == 0x04 && i < n-1 && !bcj: // x86 BCJ
			bcj = true
			if len(props) == 4 {
				bcjStart = le.Uint32(props)
			} else if len(props) != 0 {
				return nil, errors.New("xz: bad x86 BCJ properties")
			}
		case id == 0x21 && i == n-1 && len(props) == 1: // LZMA2, last
			bits := int(props[0] & 0x3f)
			if bits > 39 {
				return nil, fmt.Errorf("xz: LZMA2 dictionary size code %d", bits)
			}
			dictCap = (2 | bits&1) << (bits/2 + 11)
		default:
			return nil, fmt.Errorf("xz: filter %#x (only x86 BCJ then LZMA2 are read here)", id)
		}
	}
	if dictCap == 0 {
		return nil, errors.New("xz: no LZMA2 filter")
	}
	dictCap = max(dictCap, lzma.MinDictCap)
	r, err := lzma.Reader2Config{DictCap: dictCap}.NewReader2(bytes.NewReader(data[p+hs:]))
	if err != nil {
		return nil, fmt.Errorf("xz: %w", err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("xz: %w", err)
	}
	if bcj {
		x86BCJDecode(out, bcjStart)
	}
	return out, nil
}

// x86BCJDecode undoes the x86 BCJ filter on buf, which starts at stream
// offset start: the absolute addresses it wrote into CALL and JMP
// (E8/E9) instructions become relative again. This is the filter of XZ
// Utils and the kernel's own decompressor (lib/xz/xz_dec_bcj.c).
func x86BCJDecode(buf []byte, start uint32) {
	allowed := [8]bool{true, true, true, false, true, false, false, false}
	bitNum := [8]uint32{0, 1, 2, 2, 3, 3, 3, 3}
	test := func(b byte) bool { return b == 0x00 || b == 0xff }
	if len(buf) <= 4 {
		return
	}
	size := len(buf) - 4
	prevPos := -1
	prevMask := uint32(0)
	for i := 0; i < size; i++ {
		if buf[i]&0xfe != 0xe8 {
			continue
		}
		d := i - prevPos
		if d > 3 {
			prevMask = 0
		} else {
			prevMask = (prevMask << (d - 1)) & 7
			if prevMask != 0 {
				b := buf[i+4-int(bitNum[prevMask])]
				if !allowed[prevMask] || test(b) {
					prevPos = i
					prevMask = prevMask<<1 | 1
					continue
				}
			}
		}
		prevPos = i
		if !test(buf[i+4]) {
			prevMask = prevMask<<1 | 1
			continue
		}
		src := binary.LittleEndian.Uint32(buf[i+1:])
		var dest uint32
		for {
			dest = src - (start + uint32(i) + 5)
			if prevMask == 0 {
				break
			}
			j := bitNum[prevMask] * 8
			if !test(byte(dest >> (24 - j))) {
				break
			}
			src = dest ^ (1<<(32-j) - 1)
		}
		dest &= 0x01ffffff
		dest |= -(dest & 0x01000000)
		binary.LittleEndian.PutUint32(buf[i+1:], dest)
		i += 4
	}
}
