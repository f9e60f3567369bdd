package image

import (
	"hash"
	"sync/atomic"
	"time"
)

// asyncHash chunks and depth: the producer copies what passes the hash
// into a chunk and goes on while a goroutine of its own hashes the
// chunk, so a qcow2 conversion or a decompression and the hash use both
// cores of a two-CPU machine. Memory is asyncHashChunk*asyncHashChunks.
const (
	asyncHashChunk  = 512 << 10
	asyncHashChunks = 4
)

// asyncHash feeds h from its own goroutine, in the order of the writes.
// Wait ends the goroutine; h holds the digest of everything written
// after it. The goroutine only hashes, so Write blocks only while the
// hash is behind (counted in waited). Chunks are made as needed: a raw
// image passes only its first bytes through here.
type asyncHash struct {
	h      hash.Hash
	waited *atomic.Int64
	free   chan []byte
	full   chan []byte
	made   int // chunks made so far
	cur    []byte
	done   chan struct{}
	ended  bool
}

func newAsyncHash(h hash.Hash, waited *atomic.Int64) *asyncHash {
	a := &asyncHash{
		h: h, waited: waited,
		free: make(chan []byte, asyncHashChunks),
		full: make(chan []byte, asyncHashChunks),
		done: make(chan struct{}),
	}
	go func() {
		defer close(a.done)
		for b := range a.full {
			a.h.Write(b)
			a.free <- b[:0]
		}
	}()
	return a
}

func (a *asyncHash) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if a.cur == nil {
			a.cur = a.take()
		}
		k := min(len(p), cap(a.cur)-len(a.cur))
		a.cur = append(a.cur, p[:k]...)
		p = p[k:]
		if len(a.cur) == cap(a.cur) {
			a.full <- a.cur // never blocks: there are only asyncHashChunks
			a.cur = nil
		}
	}
	return n, nil
}

func (a *asyncHash) take() []byte {
	select {
	case b := <-a.free:
		return b
	default:
	}
	if a.made < asyncHashChunks {
		a.made++
		return make([]byte, 0, asyncHashChunk)
	}
	defer since(a.waited, time.Now())
	return <-a.free
}

// Wait hashes what is left and ends the goroutine; safe to call again.
func (a *asyncHash) Wait() {
	if a.ended {
		return
	}
	a.ended = true
	if len(a.cur) > 0 {
		a.full <- a.cur
		a.cur = nil
	}
	close(a.full)
	<-a.done
}
