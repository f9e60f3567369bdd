package qcow2

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// buildImage makes a small qcow2 v3 image by hand: 512-byte clusters,
// virtual size 8 clusters + 100 bytes; guest cluster 0 data, 1 a zero
// flag, 2 compressed, 3 unallocated, the rest data in one host run, the
// last cluster partial. It returns the image and the guest bytes.
func buildImage() ([]byte, []byte) {
	const cs = 512
	size := int64(8*cs + 100)
	guest := make([]byte, size)
	img := make([]byte, 16*cs)
	be := binary.BigEndian
	copy(img, Magic)
	be.PutUint32(img[4:], 3)
	be.PutUint32(img[20:], 9)
	be.PutUint64(img[24:], uint64(size))
	be.PutUint32(img[36:], 1)
	be.PutUint64(img[40:], 1*cs) // L1
	be.PutUint64(img[48:], 15*cs)
	be.PutUint32(img[56:], 1)
	be.PutUint32(img[96:], 4)
	be.PutUint32(img[100:], 112)
	be.PutUint64(img[1*cs:], 2*cs|1<<63) // L1[0] -> L2 at cluster 2
	l2 := img[2*cs:]
	fill := func(g, h int64) {
		for i := range int64(cs) {
			if g*cs+i < size {
				b := byte(g*31 + i*7 + 1)
				guest[g*cs+i] = b
				img[h*cs+i] = b
			}
		}
		be.PutUint64(l2[g*8:], uint64(h*cs)|1<<63)
	}
	fill(0, 3)
	be.PutUint64(l2[1*8:], 1) // zero flag
	// Guest cluster 2 compressed at host offset 4*cs+7.
	plain := bytes.Repeat([]byte("qcow2!"), cs/6+1)[:cs]
	copy(guest[2*cs:], plain)
	var c bytes.Buffer
	w, _ := flate.NewWriter(&c, flate.BestCompression)
	w.Write(plain)
	w.Close()
	host := int64(4*cs + 7)
	copy(img[host:], c.Bytes())
	sectors := (host+int64(c.Len())+511)/512 - host/512 - 1
	x := uint(62 - (9 - 8))
	be.PutUint64(l2[2*8:], uint64(host)|uint64(sectors)<<x|1<<62)
	// Guest 3 unallocated; 4..8 in one run at host 6..10.
	for g := int64(4); g <= 8; g++ {
		fill(g, g+2)
	}
	return img, guest
}

type memSink struct{ bytes.Buffer }

func (m *memSink) WriteZeros(n int64) error { m.Write(make([]byte, n)); return nil }

func TestConvertHandBuilt(t *testing.T) {
	img, guest := buildImage()
	q, err := Open(bytes.NewReader(img), int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	var s memSink
	if err := q.Convert(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Bytes(), guest) {
		t.Fatalf("guest contents differ (%d vs %d bytes)", s.Len(), len(guest))
	}
}

func TestRefusals(t *testing.T) {
	img, _ := buildImage()
	for name, mod := range map[string]func(b []byte){
		"backing file":       func(b []byte) { binary.BigEndian.PutUint64(b[8:], 4000); binary.BigEndian.PutUint32(b[16:], 4) },
		"external data file": func(b []byte) { binary.BigEndian.PutUint64(b[72:], incompatDataFile) },
		"encrypted":          func(b []byte) { binary.BigEndian.PutUint32(b[32:], 1) },
		"extended L2":        func(b []byte) { binary.BigEndian.PutUint64(b[72:], incompatExtendedL2) },
		"unknown feature":    func(b []byte) { binary.BigEndian.PutUint64(b[72:], 1<<40) },
	} {
		b := bytes.Clone(img)
		mod(b)
		if _, err := Open(bytes.NewReader(b), int64(len(b))); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: got %v, want ErrUnsupported", name, err)
		}
	}
}

type countSink struct{ n int64 }

func (c *countSink) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
func (c *countSink) WriteZeros(n int64) error    { c.n += n; return nil }

// FuzzConvert feeds arbitrary bytes to the header, L1 and L2 readers and
// the cluster decoders: they must fail cleanly, never panic, and produce
// exactly the virtual size when they succeed.
func FuzzConvert(f *testing.F) {
	img, _ := buildImage()
	f.Add(img)
	f.Add(img[:104])
	f.Add([]byte("QFI\xfb\x00\x00\x00\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		// Bound the work: fuzzed headers describe huge disks of
		// decompression bombs; the agent bounds them by the device size.
		if q.Header.Size > 64<<20 {
			return
		}
		q.MaxRun = 4096 // small allocations keep the fuzzer fast
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var s countSink
		if err := q.Convert(ctx, &s); err != nil {
			return
		}
		if s.n != int64(q.Header.Size) {
			t.Fatalf("converted %d bytes, virtual size %d", s.n, q.Header.Size)
		}
	})
}
