package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memTarget is a blockTarget in memory that, like a device, reads each
// buffer while the write is in flight (after a delay), so a buffer handed
// back to the producer too early shows up as wrong bytes.
type memTarget struct {
	mu     sync.Mutex
	data   []byte
	zeroed [][2]int64
	delay  time.Duration
	// awaitOverlap makes the first writes wait (up to 10 s) until a
	// second write is in flight, so a pipeline that overlaps writes shows
	// it whatever the machine's load, and one that does not shows it too.
	awaitOverlap bool
	inFlight     atomic.Int32
	maxIn        atomic.Int32
	failAt       int64 // WriteAt at this offset fails (-1: never)
}

func (m *memTarget) WriteAt(p []byte, off int64) (int, error) {
	n := m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	for {
		old := m.maxIn.Load()
		if n <= old || m.maxIn.CompareAndSwap(old, n) {
			break
		}
	}
	if m.awaitOverlap {
		for deadline := time.Now().Add(10 * time.Second); m.maxIn.Load() < 2 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(m.delay)
	if off == m.failAt {
		return 0, errors.New("injected I/O error")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	copy(m.data[off:], p)
	return len(p), nil
}

func (m *memTarget) ZeroRange(off, n int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.data[off : off+n])
	m.zeroed = append(m.zeroed, [2]int64{off, n})
	return nil
}

func (m *memTarget) Size() int64                            { return int64(len(m.data)) }
func (m *memTarget) Finish(context.Context) (string, error) { return "", nil }
func (m *memTarget) Close() error                           { return nil }

func newMemTarget(size int, delay time.Duration) *memTarget {
	return &memTarget{data: bytes.Repeat([]byte{0xEE}, size), delay: delay, failAt: -1}
}

// The raw path: every byte hashed once, written once, in place; zero
// segments merged into one zero-out; writes overlap up to writeDepth; no
// buffer is refilled while a write or the hash still reads it.
func TestDiskWriterRawPipeline(t *testing.T) {
	img := testImage(40<<20+4096+100, 30)  // unaligned tail
	copy(img[9<<20:], make([]byte, 3<<20)) // zero run across a buffer boundary
	dev := newMemTarget(len(img)+(1<<20), 2*time.Millisecond)
	dev.awaitOverlap = true
	h := sha256.New()
	w, err := newDiskWriter(dev, "mem", false, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Odd read sizes, so buffers fill across reads.
	n, err := w.ReadFrom(&oddReader{r: bytes.NewReader(img)})
	if err != nil || n != int64(len(img)) {
		t.Fatalf("ReadFrom %d %v", n, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(img); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Error("hash differs from the image's")
	}
	if !bytes.Equal(dev.data[:len(img)], img) {
		t.Error("device content differs from the image")
	}
	if !bytes.Equal(dev.data[len(img):], bytes.Repeat([]byte{0xEE}, 1<<20)) {
		t.Error("bytes past the image were written")
	}
	if got := dev.maxIn.Load(); got < 2 || got > writeDepth {
		t.Errorf("at most %d writes in flight, want 2..%d", got, writeDepth)
	}
	if w.written.Load() != int64(len(img)) || w.zeroOut.Load() == 0 {
		t.Errorf("written %d zeroed %d", w.written.Load(), w.zeroOut.Load())
	}
	covered := false
	for _, z := range dev.zeroed {
		covered = covered || z[0] <= 9<<20 && z[0]+z[1] >= 12<<20
	}
	if !covered {
		t.Errorf("the 3 MiB zero run across a buffer boundary is not one zero-out: %v", dev.zeroed)
	}
}

// A device error reaches the producer as a write failure and Close; the
// writer's goroutines stop, nothing blocks.
func TestDiskWriterDeviceError(t *testing.T) {
	img := bytes.Repeat([]byte{1}, 64<<20)
	dev := newMemTarget(len(img), 0)
	dev.failAt = 8 << 20
	w, err := newDiskWriter(dev, "mem", false, sha256.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The producer sees the failure at its next buffer (a write
	// failure: no new download can fix it), or else Close does.
	_, err = w.ReadFrom(bytes.NewReader(img))
	if err != nil {
		if !isWriteFailure(err) {
			t.Errorf("not marked as a write failure: %v", err)
		}
		w.abort()
	} else {
		err = w.Close()
	}
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("writing 4194304 bytes at offset 8388608 of mem: injected I/O error")) {
		t.Fatalf("got %v", err)
	}
}

// A producer that fails mid-image aborts the writer cleanly.
func TestDiskWriterAbort(t *testing.T) {
	dev := newMemTarget(32<<20, time.Millisecond)
	w, err := newDiskWriter(dev, "mem", false, sha256.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.ReadFrom(io.MultiReader(bytes.NewReader(testImage(10<<20, 50)), errReader{}))
	if err == nil || err.Error() != "cut" {
		t.Fatalf("got %v", err)
	}
	w.abort()
	w.abort() // idempotent
}

type oddReader struct{ r io.Reader }

func (o *oddReader) Read(p []byte) (int, error) {
	return o.r.Read(p[:min(len(p), 123457)])
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("cut") }
