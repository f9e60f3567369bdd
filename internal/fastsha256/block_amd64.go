//go:build amd64 && !purego

package fastsha256

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"

	"golang.org/x/sys/cpu"
)

// newAssembly returns the assembly digest unless crypto/sha256 has fast
// code for this CPU. That choice mirrors crypto/sha256's on amd64: its
// AVX2 code needs AVX, AVX2 and BMI2, and it takes its SHA-NI code only
// with AVX as well; without AVX2 it runs its generic Go code, which the
// assembly beats.
func newAssembly() hash.Hash {
	if cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasBMI2 {
		return nil
	}
	return newDigest()
}

// blockAMD64 hashes the whole 64-byte blocks of p into dig.
//
//go:noescape
func blockAMD64(dig *[8]uint32, p []byte)

// iv is SHA-256's initial hash value (FIPS 180-4, 5.3.3).
var iv = [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}

// digest is SHA-256 over blockAMD64.
type digest struct {
	h   [8]uint32
	buf [sha256.BlockSize]byte
	nb  int    // bytes in buf
	len uint64 // bytes written
}

func newDigest() *digest {
	d := &digest{}
	d.Reset()
	return d
}

func (d *digest) Reset() {
	d.h, d.nb, d.len = iv, 0, 0
}

func (d *digest) Size() int      { return sha256.Size }
func (d *digest) BlockSize() int { return sha256.BlockSize }

func (d *digest) Write(p []byte) (int, error) {
	n := len(p)
	d.len += uint64(n)
	if d.nb > 0 {
		k := copy(d.buf[d.nb:], p)
		d.nb += k
		p = p[k:]
		if d.nb < len(d.buf) {
			return n, nil
		}
		blockAMD64(&d.h, d.buf[:])
		d.nb = 0
	}
	if full := len(p) &^ (sha256.BlockSize - 1); full > 0 {
		blockAMD64(&d.h, p[:full])
		p = p[full:]
	}
	d.nb = copy(d.buf[:], p)
	return n, nil
}

// Sum appends the digest of what was written to b; d is unchanged.
func (d *digest) Sum(b []byte) []byte {
	c := *d
	// The padding: 0x80, zeros up to 56 bytes into a block, the length
	// in bits.
	var pad [sha256.BlockSize + 8]byte
	pad[0] = 0x80
	k := 56 - int(c.len%sha256.BlockSize)
	if k <= 0 {
		k += sha256.BlockSize
	}
	binary.BigEndian.PutUint64(pad[k:], c.len*8)
	_, _ = c.Write(pad[:k+8])
	for _, v := range c.h {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return b
}
