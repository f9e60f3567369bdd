//go:build amd64 && !purego

package fastsha2

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"hash"

	"golang.org/x/sys/cpu"
)

// goFast256 and goFast512 mirror crypto/sha256's and crypto/sha512's
// choice on amd64 (crypto/internal/fips140/sha256 and sha512): their AVX2
// code needs AVX, AVX2 and BMI2; without it they run their generic Go
// code, which the assembly beats. SHA-256 also has SHA-NI code, taken with
// AVX, SHA, SSE4.1 and SSSE3: x/sys/cpu does not report SHA, and the CPUs
// with SHA but no AVX2 (Goldmont Atoms) have no AVX either, so there too Go
// runs its generic code and AVX2 alone decides.
func goFast256() bool { return goFast512() }

func goFast512() bool {
	x := cpu.X86
	return x.HasAVX && x.HasAVX2 && x.HasBMI2
}

func assembly256() hash.Hash {
	if goFast256() {
		return nil
	}
	return newDigest256()
}

func assembly512() hash.Hash {
	if goFast512() {
		return nil
	}
	return newDigest512()
}

// block256AMD64 hashes the whole 64-byte blocks of p into dig.
//
//go:noescape
func block256AMD64(dig *[8]uint32, p []byte)

// block512AMD64 hashes the whole 128-byte blocks of p into dig.
//
//go:noescape
func block512AMD64(dig *[8]uint64, p []byte)

// The initial hash values (FIPS 180-4, 5.3.3 and 5.3.5).
var (
	iv256 = [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}
	iv512 = [8]uint64{0x6a09e667f3bcc908, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1,
		0x510e527fade682d1, 0x9b05688c2b3e6c1f, 0x1f83d9abfb41bd6b, 0x5be0cd19137e2179}
)

// blocks cuts a stream into whole blocks for a block function and pads
// its end (FIPS 180-4, 5.1): 0x80, zeros, the length in bits in a field
// of size/8 bytes (8 for SHA-256, 16 for SHA-512, whose upper 8 bytes
// stay zero for any stream shorter than 2^61 bytes).
type blocks struct {
	buf [sha512.BlockSize]byte
	nb  int    // bytes in buf
	len uint64 // bytes written
}

func (b *blocks) write(p []byte, size int, block func([]byte)) {
	b.len += uint64(len(p))
	if b.nb > 0 {
		k := copy(b.buf[b.nb:size], p)
		b.nb += k
		p = p[k:]
		if b.nb < size {
			return
		}
		block(b.buf[:size])
		b.nb = 0
	}
	if full := len(p) - len(p)%size; full > 0 {
		block(p[:full])
		p = p[full:]
	}
	b.nb = copy(b.buf[:], p)
}

// pad returns the padding for a stream of b.len bytes in size-byte blocks.
func (b *blocks) pad(size int) []byte {
	field := size / 8
	p := make([]byte, 2*size)
	p[0] = 0x80
	m := size - field - int(b.len%uint64(size)) // 0x80 and the zeros
	if m <= 0 {
		m += size
	}
	binary.BigEndian.PutUint64(p[m+field-8:], b.len*8)
	return p[:m+field]
}

type digest256 struct {
	h [8]uint32
	b blocks
}

func newDigest256() *digest256 {
	d := &digest256{}
	d.Reset()
	return d
}

func (d *digest256) Reset()         { d.h, d.b = iv256, blocks{} }
func (d *digest256) Size() int      { return sha256.Size }
func (d *digest256) BlockSize() int { return sha256.BlockSize }
func (d *digest256) block(p []byte) { block256AMD64(&d.h, p) }

func (d *digest256) Write(p []byte) (int, error) {
	d.b.write(p, sha256.BlockSize, d.block)
	return len(p), nil
}

// Sum appends the digest of what was written to out; d is unchanged.
func (d *digest256) Sum(out []byte) []byte {
	c := *d
	c.b.write(c.b.pad(sha256.BlockSize), sha256.BlockSize, c.block)
	for _, v := range c.h {
		out = binary.BigEndian.AppendUint32(out, v)
	}
	return out
}

type digest512 struct {
	h [8]uint64
	b blocks
}

func newDigest512() *digest512 {
	d := &digest512{}
	d.Reset()
	return d
}

func (d *digest512) Reset()         { d.h, d.b = iv512, blocks{} }
func (d *digest512) Size() int      { return sha512.Size }
func (d *digest512) BlockSize() int { return sha512.BlockSize }
func (d *digest512) block(p []byte) { block512AMD64(&d.h, p) }

func (d *digest512) Write(p []byte) (int, error) {
	d.b.write(p, sha512.BlockSize, d.block)
	return len(p), nil
}

// Sum appends the digest of what was written to out; d is unchanged.
func (d *digest512) Sum(out []byte) []byte {
	c := *d
	c.b.write(c.b.pad(sha512.BlockSize), sha512.BlockSize, c.block)
	for _, v := range c.h {
		out = binary.BigEndian.AppendUint64(out, v)
	}
	return out
}
