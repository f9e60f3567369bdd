package image

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Write geometry. Writes of a few MiB at MiB-aligned offsets with O_DIRECT
// run at the device's speed without filling the page cache (small writes
// were four times slower on our machine); the zero check works per
// segment so mostly-empty images turn into few, large zero-outs.
const (
	writeBufSize = 4 << 20
	directAlign  = 4096
	zeroSegSize  = 1 << 20
)

// Pipeline depth. A buffer is busy for the longer of its hash and its
// write, not their sum, so four buffers keep the download one buffer ahead
// of two writes in flight (the second queued in the device while the
// first completes); six measured no faster with scripts/bench-image.sh on
// our machine and cost 8 MiB more (docs/performance.md: image writing).
const (
	writeBufs  = 4
	writeDepth = 2
)

// diskWriter receives an image's bytes in disk order and writes them to a
// device from its own goroutines, so downloading, decompressing, hashing
// and writing overlap. Buffers come from a fixed pool: memory is
// writeBufSize*writeBufs whatever the image size.
//
// A filled buffer goes to the hash goroutine (raw images) and to the
// dispatcher at the same time: the hash reads it while the device reads it
// for the write, and it returns to the pool when both are done. The
// dispatcher, in disk order, finds all-zero segments, merges them into
// zero runs and hands data runs and zero runs to writeDepth workers.
// Requests cover disjoint ranges, so their completion order does not
// matter; Close waits for all of them and for the hash.
type diskWriter struct {
	dev    blockTarget
	name   string
	zeroed bool // the device reads as zeros already: skip zero runs

	pool     []byte // backing memory of all buffers, page aligned
	free     chan *writeBuf
	dispatch chan writeJob // producer to dispatcher, in disk order
	hashIn   chan *writeBuf
	reqs     chan writeReq // dispatcher to workers
	hash     hash.Hash
	clock    *stageClock
	wg       sync.WaitGroup // every goroutine
	closed   bool

	failOnce sync.Once
	failed   chan struct{} // closed on the first error
	err      error         // the first error, set before failed closes

	cur  *writeBuf // buffer being filled (nil if none)
	fill int
	off  int64 // disk offset of cur.b[0]

	// Counters read by the progress reporter.
	queued  atomic.Int64 // bytes accepted from the image (data and zeros)
	written atomic.Int64 // bytes on the device (written or zeroed or skipped)
	zeroOut atomic.Int64 // bytes zeroed with the zero-out ioctl
	skipped atomic.Int64 // zero bytes skipped on a zeroed device
}

// writeBuf is one pool buffer; refs counts the stages still reading it.
type writeBuf struct {
	b    []byte
	n    int // bytes of data, set before the buffer is handed over
	refs atomic.Int32
}

// writeJob is what the producer hands over, in disk order.
type writeJob struct {
	off int64
	buf *writeBuf // data; nil for a zero run
	n   int64     // bytes of data in buf, or length of the zero run
}

// writeReq is one device operation for a worker.
type writeReq struct {
	off  int64
	p    []byte    // data; nil for a zero run of n bytes
	n    int64     // zero run length
	from *writeBuf // p's buffer, released when the write is done
}

// blockTarget is what the writer needs from a device; the Linux version
// uses O_DIRECT, the zero-out ioctl and fsync.
type blockTarget interface {
	// WriteAt writes p at off; p and off are aligned to directAlign except
	// for the image's last bytes. Calls for disjoint ranges may run
	// concurrently.
	WriteAt(p []byte, off int64) (int, error)
	// ZeroRange makes [off, off+n) read as zeros.
	ZeroRange(off, n int64) error
	// Size is the device size in bytes, or -1 for a growing regular file.
	Size() int64
	// Finish flushes to stable storage and re-reads the partition table.
	Finish(ctx context.Context) (warning string, err error)
	Close() error
}

// newDiskWriter starts the writer. With h set, every data buffer is hashed
// before the writer finishes: for a raw image the bytes written are the
// bytes downloaded, and hashing beside the download and the write instead
// of in line with either keeps both cores busy. The writer adds its waits
// and device times to clock (nil: a clock of its own).
func newDiskWriter(dev blockTarget, name string, zeroed bool, h hash.Hash, clock *stageClock) (*diskWriter, error) {
	if clock == nil {
		clock = &stageClock{}
	}
	pool, err := alignedAlloc(writeBufSize * writeBufs)
	if err != nil {
		return nil, err
	}
	w := &diskWriter{
		dev: dev, name: name, zeroed: zeroed, pool: pool, hash: h, clock: clock,
		free:     make(chan *writeBuf, writeBufs),
		dispatch: make(chan writeJob, writeBufs),
		reqs:     make(chan writeReq, writeDepth),
		failed:   make(chan struct{}),
	}
	for i := range writeBufs {
		w.free <- &writeBuf{b: pool[i*writeBufSize : (i+1)*writeBufSize : (i+1)*writeBufSize]}
	}
	if h != nil {
		// Never blocks the producer: at most writeBufs buffers exist.
		w.hashIn = make(chan *writeBuf, writeBufs)
		w.wg.Go(w.hashLoop)
	}
	w.wg.Go(w.dispatchLoop)
	for range writeDepth {
		w.wg.Go(w.workLoop)
	}
	return w, nil
}

// fail records the first error and stops all work.
func (w *diskWriter) fail(err error) {
	w.failOnce.Do(func() {
		w.err = err
		close(w.failed)
	})
}

func (w *diskWriter) isFailed() bool {
	select {
	case <-w.failed:
		return true
	default:
		return false
	}
}

// release drops one reference to b; the last one returns it to the pool.
func (w *diskWriter) release(b *writeBuf) {
	if b != nil && b.refs.Add(-1) == 0 {
		w.free <- b
	}
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
		n := copy(w.cur.b[w.fill:], p)
		w.fill += n
		p = p[n:]
		w.queued.Add(int64(n))
		if w.fill == len(w.cur.b) {
			if err := w.submit(); err != nil {
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
		n, err := r.Read(w.cur.b[w.fill:])
		w.fill += n
		total += int64(n)
		w.queued.Add(int64(n))
		if w.fill == len(w.cur.b) {
			if serr := w.submit(); serr != nil {
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
		k := min(n, int64(len(w.cur.b)-w.fill))
		clear(w.cur.b[w.fill : w.fill+int(k)])
		w.fill += int(k)
		w.queued.Add(k)
		n -= k
		if w.fill == len(w.cur.b) {
			if err := w.submit(); err != nil {
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
	default:
	}
	defer since(&w.clock.bufferWait, time.Now())
	select {
	case b := <-w.free:
		w.cur, w.fill = b, 0
		return nil
	case <-w.failed:
		return w.stopped()
	}
}

// stopped turns the writer's failure into the error for the producer.
func (w *diskWriter) stopped() error {
	// Marked so the caller reports a device failure, which no new
	// download can fix, not a download failure.
	return writeFailure{w.err}
}

// submit hands the filled buffer to the hash (if any) and the dispatcher.
func (w *diskWriter) submit() error {
	b, n := w.cur, w.fill
	w.cur = nil
	off := w.off
	w.off += int64(n)
	b.n = n
	b.refs.Store(1)
	if w.hashIn != nil {
		b.refs.Store(2)
		w.hashIn <- b
	}
	return w.send(writeJob{off: off, buf: b, n: int64(n)})
}

func (w *diskWriter) send(j writeJob) error {
	select {
	case w.dispatch <- j:
		return nil
	default:
	}
	defer since(&w.clock.bufferWait, time.Now())
	select {
	case w.dispatch <- j:
		return nil
	case <-w.failed:
		if j.buf != nil {
			w.release(j.buf)
		}
		return w.stopped()
	}
}

// Close flushes the last buffer and waits for every write and for the
// hash. It does not sync; Finish does.
func (w *diskWriter) Close() error {
	if w.cur != nil && w.fill > 0 {
		// An error here means the writer failed; w.err says why.
		_ = w.submit()
	} else if w.cur != nil {
		w.free <- w.cur
		w.cur = nil
	}
	w.stop()
	if w.isFailed() {
		return w.err
	}
	return nil
}

// abort stops the writer after a failure elsewhere.
func (w *diskWriter) abort() {
	w.fail(errors.New("aborted"))
	w.stop()
}

// stop ends the inputs, waits for every goroutine (so no stage still reads
// a buffer, nor the kernel writes from one) and unmaps the pool.
func (w *diskWriter) stop() {
	if w.closed {
		return
	}
	w.closed = true
	close(w.dispatch)
	if w.hashIn != nil {
		close(w.hashIn)
	}
	w.wg.Wait()
	freeAligned(w.pool)
}

// Size is the number of image bytes accepted so far.
func (w *diskWriter) Size() int64 { return w.queued.Load() }

func (w *diskWriter) hashLoop() {
	for b := range w.hashIn {
		if !w.isFailed() {
			w.hash.Write(b.b[:b.n])
		}
		w.release(b)
	}
}

// dispatchLoop walks the jobs in disk order: size check, zero detection,
// zero-run merging; the device work goes to the workers.
func (w *diskWriter) dispatchLoop() {
	defer close(w.reqs)
	var zOff, zLen int64 // pending zero run, merged across jobs
	flushZero := func() {
		if zLen > 0 {
			w.reqs <- writeReq{off: zOff, n: zLen}
			zLen = 0
		}
	}
	addZero := func(o, n int64) {
		if zLen > 0 && zOff+zLen == o {
			zLen += n
			return
		}
		flushZero()
		zOff, zLen = o, n
	}
	for j := range w.dispatch {
		if w.isFailed() {
			w.release(j.buf)
			continue // drain so the producer never blocks
		}
		if size := w.dev.Size(); size >= 0 && j.off+j.n > size {
			w.fail(fmt.Errorf("image is larger than %s (%d bytes): it needs at least %d", w.name, size, j.off+j.n))
			w.release(j.buf)
			continue
		}
		if j.buf == nil {
			addZero(j.off, j.n)
			continue
		}
		buf := j.buf.b[:j.n]
		for start := 0; start < len(buf); {
			end := min(start+zeroSegSize, len(buf))
			if isZero(buf[start:end]) && (end-start)%512 == 0 {
				addZero(j.off+int64(start), int64(end-start))
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
			flushZero()
			j.buf.refs.Add(1)
			w.reqs <- writeReq{off: j.off + int64(start), p: buf[start:end], from: j.buf}
			start = end
		}
		w.release(j.buf)
	}
	if !w.isFailed() {
		flushZero()
	}
}

// workLoop performs device operations; writeDepth of them run at once.
func (w *diskWriter) workLoop() {
	for r := range w.reqs {
		if !w.isFailed() {
			if err := w.do(r); err != nil {
				w.fail(err)
			}
		}
		w.release(r.from)
	}
}

func (w *diskWriter) do(r writeReq) error {
	defer since(&w.clock.write, time.Now())
	if r.p == nil {
		if w.zeroed {
			w.skipped.Add(r.n)
			w.written.Add(r.n)
			return nil
		}
		if err := w.dev.ZeroRange(r.off, r.n); err != nil {
			return fmt.Errorf("zeroing %d bytes at offset %d of %s: %w", r.n, r.off, w.name, err)
		}
		w.zeroOut.Add(r.n)
		w.written.Add(r.n)
		return nil
	}
	if _, err := w.dev.WriteAt(r.p, r.off); err != nil {
		return fmt.Errorf("writing %d bytes at offset %d of %s: %w", len(r.p), r.off, w.name, err)
	}
	w.written.Add(int64(len(r.p)))
	return nil
}

// isZero reports whether b holds only zero bytes; eight bytes at a time
// because this runs over every byte of every image.
func isZero(b []byte) bool {
	le := binary.LittleEndian
	for len(b) >= 64 {
		if le.Uint64(b[0:])|le.Uint64(b[8:])|le.Uint64(b[16:])|le.Uint64(b[24:])|le.Uint64(b[32:])|le.Uint64(b[40:])|le.Uint64(b[48:])|le.Uint64(b[56:]) != 0 {
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
