package image

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// backWindow is how many of the most recently streamed bytes stay in
// memory: compressed qcow2 clusters end inside a 512-byte sector shared with
// the next one, so reads step back a little all the time.
const backWindow = 4 << 20

// randomReader is random access to the same bytes a forwardReaderAt
// streams; nil when the source only streams (a compressed container).
type randomReader interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
}

// forwardReaderAt serves ReadAt from one sequential stream so that a qcow2
// image whose metadata precedes its data (what qemu-img writes) is
// downloaded exactly once and every byte of it passes the checksum hash in
// order. Reads ahead of the stream skip forward (the skipped bytes still
// get hashed); reads behind it come from the last backWindow bytes or,
// failing that, from random access (a Range request), which the hash does
// not see because the stream covers those bytes already.
type forwardReaderAt struct {
	ctx    context.Context
	stream io.Reader
	random randomReader
	pos    int64  // stream offset of the next byte
	ring   []byte // ring[o%len(ring)] holds stream byte o for o in [pos-filled, pos)
	filled int64
	eof    bool

	// Counters for the result: bytes skipped ahead and fetched again.
	Skipped   int64
	Refetched int64
}

func newForwardReaderAt(ctx context.Context, stream io.Reader, random randomReader) *forwardReaderAt {
	return &forwardReaderAt{ctx: ctx, stream: stream, random: random, ring: make([]byte, backWindow)}
}

func (r *forwardReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	done := 0
	// The part behind the stream position.
	if off < r.pos {
		n := int(min(int64(len(p)), r.pos-off))
		if off >= r.pos-r.filled {
			r.copyFromRing(p[:n], off)
		} else {
			if r.random == nil {
				return 0, fmt.Errorf("the image needs bytes at offset %d again after streaming past them, and this source cannot seek (a qcow2 image inside a compressed file must have its metadata first)", off)
			}
			m, err := r.random.ReadAt(r.ctx, p[:n], off)
			r.Refetched += int64(m)
			if m < n {
				if err == nil {
					err = io.ErrUnexpectedEOF
				}
				return m, err
			}
		}
		done = n
	}
	if done == len(p) {
		return done, nil
	}
	// Skip forward, hashing on the way.
	for r.pos < off && !r.eof {
		k := int(min(off-r.pos, int64(len(r.ring))))
		n, err := r.fill(k)
		r.Skipped += int64(n)
		if err != nil {
			return done, err
		}
	}
	// Read the rest from the stream into p, keeping a copy in the ring.
	for done < len(p) && !r.eof {
		n, err := r.stream.Read(p[done:])
		r.remember(p[done : done+n])
		done += n
		if errors.Is(err, io.EOF) {
			r.eof = true
			break
		}
		if err != nil {
			return done, err
		}
	}
	if done < len(p) {
		return done, io.EOF
	}
	return done, nil
}

// fill streams up to k bytes into the ring.
func (r *forwardReaderAt) fill(k int) (int, error) {
	start := int(r.pos % int64(len(r.ring)))
	k = min(k, len(r.ring)-start)
	n, err := r.stream.Read(r.ring[start : start+k])
	r.pos += int64(n)
	r.filled = min(r.filled+int64(n), int64(len(r.ring)))
	if errors.Is(err, io.EOF) {
		r.eof = true
		err = nil
	}
	return n, err
}

func (r *forwardReaderAt) remember(b []byte) {
	if len(b) > len(r.ring) {
		r.pos += int64(len(b) - len(r.ring))
		b = b[len(b)-len(r.ring):]
	}
	for len(b) > 0 {
		start := int(r.pos % int64(len(r.ring)))
		n := copy(r.ring[start:], b)
		b = b[n:]
		r.pos += int64(n)
		r.filled = min(r.filled+int64(n), int64(len(r.ring)))
	}
}

func (r *forwardReaderAt) copyFromRing(p []byte, off int64) {
	for len(p) > 0 {
		start := int(off % int64(len(r.ring)))
		n := copy(p, r.ring[start:])
		p = p[n:]
		off += int64(n)
	}
}

// Drain streams the rest of the file so the hash covers all of it.
func (r *forwardReaderAt) Drain() error {
	for !r.eof {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		if _, err := r.fill(len(r.ring)); err != nil {
			return err
		}
	}
	return nil
}

// Pos is how far the stream has been read.
func (r *forwardReaderAt) Pos() int64 { return r.pos }
