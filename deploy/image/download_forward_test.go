package image

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

type bytesRandom struct{ b []byte }

func (r bytesRandom) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return bytes.NewReader(r.b).ReadAt(p, off)
}

// Random reads through the forward reader return the file's bytes, the
// stream is read once, and only reads behind the look-behind window use
// random access.
func TestForwardReaderAt(t *testing.T) {
	data := testImage(3*backWindow+12345, 70)
	r := newForwardReaderAt(context.Background(), bytes.NewReader(data), bytesRandom{data})
	rng := rand.New(rand.NewPCG(7, 7))
	for range 400 {
		off := rng.Int64N(int64(len(data)))
		n := rng.IntN(3 << 20)
		p := make([]byte, n)
		got, err := r.ReadAt(p, off)
		want := min(n, len(data)-int(off))
		if got != want || (err != nil && err != io.EOF) || (got < n && err != io.EOF) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", n, off, got, err)
		}
		if !bytes.Equal(p[:got], data[off:off+int64(got)]) {
			t.Fatalf("ReadAt(%d bytes at %d): wrong bytes", n, off)
		}
	}
	if err := r.Drain(); err != nil || r.Pos() != int64(len(data)) {
		t.Fatalf("Drain: %v at %d", err, r.Pos())
	}
	if r.Refetched == 0 {
		t.Error("no read went behind the window; the test does not cover random access")
	}

	// Without random access, a read far behind fails with a clear error.
	s := newForwardReaderAt(context.Background(), bytes.NewReader(data), nil)
	if _, err := s.ReadAt(make([]byte, 10), int64(2*backWindow)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadAt(make([]byte, 10), 0); err == nil || !strings.Contains(err.Error(), "cannot seek") {
		t.Fatalf("read behind the window without random access: %v", err)
	}
	// Within the window it still works.
	p := make([]byte, 100)
	if _, err := s.ReadAt(p, int64(2*backWindow)-50); err != nil || !bytes.Equal(p, data[2*backWindow-50:2*backWindow+50]) {
		t.Fatalf("read inside the window: %v", err)
	}
}
