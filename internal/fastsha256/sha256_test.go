package fastsha256

import (
	"bytes"
	"crypto/sha256"
	"hash"
	"math/rand/v2"
	"testing"
)

// implementations are the hashes under test: New's, and on amd64 the
// assembly digest even where New picks crypto/sha256 (digestsForTest).
func implementations() map[string]func() hash.Hash {
	m := map[string]func() hash.Hash{"New": New}
	for name, f := range digestsForTest() {
		m[name] = f
	}
	return m
}

// TestAgreesWithCryptoSHA256 hashes every length up to a few blocks, in
// one write and in uneven pieces, and compares with crypto/sha256.
func TestAgreesWithCryptoSHA256(t *testing.T) {
	data := make([]byte, 1100)
	rand.NewChaCha8([32]byte{'s', 'h', 'a'}).Read(data)
	for name, newHash := range implementations() {
		for n := range len(data) {
			want := sha256.Sum256(data[:n])
			h := newHash()
			h.Write(data[:n])
			if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
				t.Fatalf("%s: %d bytes in one write: got %x, want %x", name, n, got, want)
			}
			h.Reset()
			for p, step := data[:n], 1; len(p) > 0; step = step*3%67 + 1 {
				k := min(step, len(p))
				h.Write(p[:k])
				p = p[k:]
			}
			if got := h.Sum([]byte("prefix")); !bytes.Equal(got, append([]byte("prefix"), want[:]...)) {
				t.Fatalf("%s: %d bytes in pieces: got %x, want %x", name, n, got, want)
			}
		}
	}
}

// TestSumDoesNotChangeState: writing after a Sum continues the same
// stream, as hash.Hash requires.
func TestSumDoesNotChangeState(t *testing.T) {
	for name, newHash := range implementations() {
		h := newHash()
		h.Write([]byte("first part, "))
		_ = h.Sum(nil)
		h.Write([]byte("second part"))
		want := sha256.Sum256([]byte("first part, second part"))
		if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
			t.Errorf("%s: got %x, want %x", name, got, want)
		}
		if h.Size() != sha256.Size || h.BlockSize() != sha256.BlockSize {
			t.Errorf("%s: Size %d, BlockSize %d", name, h.Size(), h.BlockSize())
		}
	}
}

func FuzzAgreesWithCryptoSHA256(f *testing.F) {
	f.Add([]byte("abc"), uint16(1))
	f.Add(make([]byte, 200), uint16(64))
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		want := sha256.Sum256(data)
		s := min(int(split), len(data))
		for name, newHash := range implementations() {
			h := newHash()
			h.Write(data[:s])
			h.Write(data[s:])
			if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
				t.Fatalf("%s: %d bytes split at %d: got %x, want %x", name, len(data), s, got, want)
			}
		}
	})
}

// BenchmarkHash compares the implementations on the writer's 4 MiB
// buffers. Run it with GODEBUG=cpu.avx2=off (what QEMU's qemu64 CPU
// lacks) to see crypto/sha256's generic code, or under
// `qemu-x86_64 -cpu qemu64` to see emulation's costs.
func BenchmarkHash(b *testing.B) {
	buf := make([]byte, 4<<20)
	impls := implementations()
	impls["crypto/sha256"] = sha256.New
	for name, newHash := range impls {
		b.Run(name, func(b *testing.B) {
			h := newHash()
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				h.Write(buf)
			}
		})
	}
}
