package deploy

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync/atomic"
)

// Write geometry. Writes of a few MiB at MiB-aligned offsets with O_DIRECT
// run at the device's speed without filling the page cache (small writes
// were four times slower on our machine); the zero check works per
// segment so mostly-empty images turn into few, large zero-outs.
const (
	writeBufSize = 4 << 20
	writeBufs    = 4
	zeroSegSize  = 1 << 20
	directAlign  = 4096
)

// diskWriter receives an image's bytes in disk order and writes them to a
// device from its own goroutine, so downloading, decompressing and hashing
// overlap with the writes. Buffers come from a fixed pool: memory is
// writeBufSize*writeBufs whatever the image size.
type diskWriter struct {
	dev    blockTarget
	name   string
	zeroed bool // the device reads as zeros already: skip zero runs

	pool []byte // backing memory of all buffers, page aligned
	free chan []byte
	jobs chan writeJob // to the writer goroutine
	in   chan writeJob // what the producer sends to: jobs, or the hash stage
	done chan error

	cur  []byte // buffer being filled (nil if none)
	fill int
	off  int64 // disk offset of cur[0]

	// Counters read by the progress reporter.
	queued  atomic.Int64 // bytes accepted from the image (data and zeros)
	written atomic.Int64 // bytes on the device (written or zeroed or skipped)
	zeroOut atomic.Int64 // bytes zeroed with the zero-out ioctl
	skipped atomic.Int64 // zero bytes skipped on a zeroed device
}

type writeJob struct {
	off  int64
	buf  []byte // data; nil for a zero run
	n    int64  // length of a zero run
	last bool
}

// blockTarget is what the writer needs from a device; the Linux version
// uses O_DIRECT, the zero-out ioctl and fsync.
type blockTarget interface {
	// WriteAt writes p at off; p and off are aligned to directAlign except
	// for the image's last bytes.
	WriteAt(p []byte, off int64) (int, error)
	// ZeroRange makes [off, off+n) read as zeros.
	ZeroRange(off, n int64) error
	// Size is the device size in bytes, or -1 for a growing regular file.
	Size() int64
	// Finish flushes to stable storage and re-reads the partition table.
	Finish(ctx context.Context) (warning string, err error)
	Close() error
}

// newDiskWriter starts the writer. With h set, a separate goroutine hashes
// every data buffer before it is written: for a raw image the bytes
// written are the bytes downloaded, and hashing beside the download and the
// write instead of in line with either keeps both cores busy.
func newDiskWriter(dev blockTarget, name string, zeroed bool, h hash.Hash) (*diskWriter, error) {
	pool, err := alignedAlloc(writeBufSize * writeBufs)
	if err != nil {
		return nil, err
	}
	w := &diskWriter{
		dev: dev, name: name, zeroed: zeroed, pool: pool,
		free: make(chan []byte, writeBufs),
		jobs: make(chan writeJob, writeBufs+1),
		done: make(chan error, 1),
	}
	for i := range writeBufs {
		w.free <- pool[i*writeBufSize : (i+1)*writeBufSize : (i+1)*writeBufSize]
	}
	w.in = w.jobs
	if h != nil {
		w.in = make(chan writeJob, writeBufs)
		go func() {
			for j := range w.in {
				h.Write(j.buf)
				w.jobs <- j
			}
			close(w.jobs)
		}()
	}
	go w.loop()
	return w, nil
}

// Write queues image bytes. It blocks while all buffers are in flight,
// which is how the writer slows the download to the disk's pace.
func (w *diskWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		if w.cur == nil {
			if err := w.takeBuffer(); err != nil {
				return total - len(p), err
			}
		}
		n := copy(w.cur[w.fill:], p)
		w.fill += n
		p = p[n:]
		w.queued.Add(int64(n))
		if w.fill == len(w.cur) {
			if err := w.submit(false); err != nil {
				return total - len(p), err
			}
		}
	}
	return total, nil
}

// ReadFrom fills buffers straight from r, saving a copy for raw images.
func (w *diskWriter) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for {
		if w.cur == nil {
			if err := w.takeBuffer(); err != nil {
				return total, err
			}
		}
		n, err := r.Read(w.cur[w.fill:])
		w.fill += n
		total += int64(n)
		w.queued.Add(int64(n))
		if w.fill == len(w.cur) {
			if serr := w.submit(false); serr != nil {
				return total, serr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return total, nil
			}
			return total, err
		}
	}
}

// WriteZeros queues n zero bytes without copying them where it can.
func (w *diskWriter) WriteZeros(n int64) error {
	for n > 0 {
		if w.cur == nil && n >= writeBufSize {
			// Whole buffers of zeros go as one zero run; offsets stay
			// multiples of writeBufSize.
			k := n - n%writeBufSize
			if err := w.send(writeJob{off: w.off, n: k}); err != nil {
				return err
			}
			w.off += k
			w.queued.Add(k)
			n -= k
			continue
		}
		if w.cur == nil {
			if err := w.takeBuffer(); err != nil {
				return err
			}
		}
		k := min(n, int64(len(w.cur)-w.fill))
		clear(w.cur[w.fill : w.fill+int(k)])
		w.fill += int(k)
		w.queued.Add(k)
		n -= k
		if w.fill == len(w.cur) {
			if err := w.submit(false); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *diskWriter) takeBuffer() error {
	select {
	case b := <-w.free:
		w.cur, w.fill = b, 0
		return nil
	case err := <-w.done:
		return w.stopped(err)
	}
}

// stopped puts the writer goroutine's result back for Close and turns it
// into the error for the producer.
func (w *diskWriter) stopped(err error) error {
	w.done <- err
	if err == nil {
		err = errors.New("writer stopped")
	}
	// Marked so the caller reports a device failure, which no new
	// download can fix, not a download failure.
	return writeFailure{err}
}

func (w *diskWriter) submit(last bool) error {
	buf := w.cur[:w.fill]
	w.cur = nil
	off := w.off
	w.off += int64(len(buf))
	return w.send(writeJob{off: off, buf: buf, last: last})
}

func (w *diskWriter) send(j writeJob) error {
	select {
	case w.in <- j:
		return nil
	case err := <-w.done:
		return w.stopped(err)
	}
}

// Close flushes the last buffer and waits for every write. It does not
// sync; Finish does.
func (w *diskWriter) Close() error {
	var err error
	if w.cur != nil && w.fill > 0 {
		err = w.submit(true)
	} else if w.cur != nil {
		w.free <- w.cur
		w.cur = nil
	}
	close(w.in)
	werr := <-w.done
	w.done <- werr
	freeAligned(w.pool)
	return errors.Join(err, werr)
}

// abort stops the writer goroutine after a failure elsewhere.
func (w *diskWriter) abort() {
	if w.in == nil {
		return
	}
	close(w.in)
	<-w.done
	w.in = nil
	freeAligned(w.pool)
}

// Size is the number of image bytes accepted so far.
func (w *diskWriter) Size() int64 { return w.queued.Load() }

func (w *diskWriter) loop() {
	var err error
	var zOff, zLen int64 // pending zero run, merged across jobs
	flushZero := func() error {
		if zLen == 0 {
			return nil
		}
		o, n := zOff, zLen
		zLen = 0
		if w.zeroed {
			w.skipped.Add(n)
			w.written.Add(n)
			return nil
		}
		if err := w.zeroRange(o, n); err != nil {
			return err
		}
		w.zeroOut.Add(n)
		w.written.Add(n)
		return nil
	}
	addZero := func(o, n int64) error {
		if zLen > 0 && zOff+zLen == o {
			zLen += n
			return nil
		}
		if err := flushZero(); err != nil {
			return err
		}
		zOff, zLen = o, n
		return nil
	}
	for j := range w.jobs {
		if err != nil {
			if j.buf != nil {
				w.free <- j.buf[:cap(j.buf)]
			}
			continue // drain so the producer never blocks
		}
		if size := w.dev.Size(); size >= 0 && j.off+int64(len(j.buf))+j.n > size {
			err = fmt.Errorf("image is larger than %s (%d bytes): it needs at least %d", w.name, size, j.off+int64(len(j.buf))+j.n)
		} else if j.buf == nil {
			err = addZero(j.off, j.n)
		} else {
			err = w.writeData(j.off, j.buf, addZero, flushZero)
			w.free <- j.buf[:cap(j.buf)]
		}
	}
	if err == nil {
		err = flushZero()
	}
	w.done <- err
}

// writeData writes one buffer, turning all-zero segments into zero runs.
func (w *diskWriter) writeData(off int64, buf []byte, addZero func(o, n int64) error, flushZero func() error) error {
	for start := 0; start < len(buf); {
		end := min(start+zeroSegSize, len(buf))
		if isZero(buf[start:end]) && (end-start)%512 == 0 {
			if err := addZero(off+int64(start), int64(end-start)); err != nil {
				return err
			}
			start = end
			continue
		}
		// Extend the data run over following non-zero segments.
		for end < len(buf) {
			next := min(end+zeroSegSize, len(buf))
			if isZero(buf[end:next]) {
				break
			}
			end = next
		}
		if err := flushZero(); err != nil {
			return err
		}
		if _, err := w.dev.WriteAt(buf[start:end], off+int64(start)); err != nil {
			return fmt.Errorf("writing %d bytes at offset %d of %s: %w", end-start, off+int64(start), w.name, err)
		}
		w.written.Add(int64(end - start))
		start = end
	}
	return nil
}

func (w *diskWriter) zeroRange(off, n int64) error {
	if err := w.dev.ZeroRange(off, n); err != nil {
		return fmt.Errorf("zeroing %d bytes at offset %d of %s: %w", n, off, w.name, err)
	}
	return nil
}

// isZero reports whether b holds only zero bytes; eight bytes at a time
// because this runs over every byte of every image.
func isZero(b []byte) bool {
	for len(b) >= 64 {
		if le64(b[0:])|le64(b[8:])|le64(b[16:])|le64(b[24:])|le64(b[32:])|le64(b[40:])|le64(b[48:])|le64(b[56:]) != 0 {
			return false
		}
		b = b[64:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}
