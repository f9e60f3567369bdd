package fastsha2

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"math/rand/v2"
	"testing"
)

// implementation is a hash under test and its reference.
type implementation struct {
	name      string
	newHash   func() hash.Hash
	reference func() hash.Hash
}

// implementations are the constructors and, on amd64, the assembly
// digests even where the constructors pick Go's crypto.
func implementations() []implementation {
	impls := []implementation{{"New256", New256, sha256.New}, {"New512", New512, sha512.New}}
	if a256, a512 := assemblyForTest(); a256 != nil {
		impls = append(impls, implementation{"assembly SHA-256", a256, sha256.New}, implementation{"assembly SHA-512", a512, sha512.New})
	}
	return impls
}

func digest(newHash func() hash.Hash, p []byte) []byte {
	h := newHash()
	h.Write(p)
	return h.Sum(nil)
}

// TestAgreesWithGo hashes every length up to several blocks, in one write
// and in uneven pieces, and compares with Go's crypto.
func TestAgreesWithGo(t *testing.T) {
	data := make([]byte, 1100)
	rand.NewChaCha8([32]byte{'s', 'h', 'a'}).Read(data)
	for _, im := range implementations() {
		for n := range len(data) {
			want := digest(im.reference, data[:n])
			if got := digest(im.newHash, data[:n]); !bytes.Equal(got, want) {
				t.Fatalf("%s: %d bytes in one write: got %x, want %x", im.name, n, got, want)
			}
			h := im.newHash()
			for p, step := data[:n], 1; len(p) > 0; step = step*3%131 + 1 {
				k := min(step, len(p))
				h.Write(p[:k])
				p = p[k:]
			}
			if got := h.Sum([]byte("prefix")); !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Fatalf("%s: %d bytes in pieces: got %x, want %x", im.name, n, got, want)
			}
		}
	}
}

// TestSumDoesNotChangeState: writing after a Sum continues the same
// stream, and Reset starts a new one, as hash.Hash requires.
func TestSumDoesNotChangeState(t *testing.T) {
	for _, im := range implementations() {
		h := im.newHash()
		h.Write([]byte("first part, "))
		_ = h.Sum(nil)
		h.Write([]byte("second part"))
		if got, want := h.Sum(nil), digest(im.reference, []byte("first part, second part")); !bytes.Equal(got, want) {
			t.Errorf("%s: got %x, want %x", im.name, got, want)
		}
		h.Reset()
		h.Write([]byte("new"))
		if got, want := h.Sum(nil), digest(im.reference, []byte("new")); !bytes.Equal(got, want) {
			t.Errorf("%s after Reset: got %x, want %x", im.name, got, want)
		}
		if r := im.reference(); h.Size() != r.Size() || h.BlockSize() != r.BlockSize() {
			t.Errorf("%s: Size %d, BlockSize %d", im.name, h.Size(), h.BlockSize())
		}
	}
}

func FuzzAgreesWithGo(f *testing.F) {
	f.Add([]byte("abc"), uint16(1))
	f.Add(make([]byte, 300), uint16(112))
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		s := min(int(split), len(data))
		for _, im := range implementations() {
			h := im.newHash()
			h.Write(data[:s])
			h.Write(data[s:])
			if got, want := h.Sum(nil), digest(im.reference, data); !bytes.Equal(got, want) {
				t.Fatalf("%s: %d bytes split at %d: got %x, want %x", im.name, len(data), s, got, want)
			}
		}
	})
}

// BenchmarkHash compares the implementations on the image writer's 4 MiB
// buffers. Run it with GODEBUG=cpu.avx2=off (what QEMU's qemu64 CPU
// lacks) to see Go's generic code, or under `qemu-x86_64 -cpu qemu64`
// to see emulation's costs.
func BenchmarkHash(b *testing.B) {
	buf := make([]byte, 4<<20)
	impls := append(implementations(), implementation{"crypto/sha256", sha256.New, nil}, implementation{"crypto/sha512", sha512.New, nil})
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			h := im.newHash()
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				h.Write(buf)
			}
		})
	}
}
