package image

import (
	"bytes"
	"crypto/sha256"
	"sync/atomic"
	"testing"
)

// TestAsyncHashInOrder: writes of every size, across chunk boundaries,
// hash to the digest of the stream; Wait may be called twice.
func TestAsyncHashInOrder(t *testing.T) {
	data := testImage(5*asyncHashChunk+12345, 3)
	h := sha256.New()
	var waited atomic.Int64
	a := newAsyncHash(h, &waited)
	for p, step := data, 1; len(p) > 0; step = step*7%(asyncHashChunk+3) + 1 {
		k := min(step, len(p))
		if n, err := a.Write(p[:k]); n != k || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", k, n, err)
		}
		p = p[k:]
	}
	a.Wait()
	a.Wait()
	want := sha256.Sum256(data)
	if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
		t.Errorf("got %x, want %x", got, want)
	}
	if a.made > asyncHashChunks {
		t.Errorf("%d chunks made, at most %d allowed", a.made, asyncHashChunks)
	}
}
