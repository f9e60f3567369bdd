package burnin

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// DiskOptions are burnin_disk's parameters (fio's, as IPA passes them).
type DiskOptions struct {
	// Loops is fio's --loops: verified passes over each whole device.
	Loops int
	// Runtime, when positive, is fio's --runtime with --time_based: passes
	// repeat until it is over, whatever Loops says, and the last pass
	// verifies what it wrote before the time ran out.
	Runtime time.Duration
}

// DiskResult is what the burn-in did to one device.
type DiskResult struct {
	BytesWritten  int64   `json:"bytes_written"`
	BytesVerified int64   `json:"bytes_verified"`
	Passes        int     `json:"passes"`
	Seconds       float64 `json:"seconds"`
}

// diskChunk is the unit written and verified: 1 MiB, a multiple of every
// logical sector size, so direct I/O stays aligned.
const diskChunk = 1 << 20

// Disks burns in every device at once (fio runs one job per device in
// parallel): each pass writes the whole device in 1 MiB chunks, in a
// pseudo-random order with data derived from the pass and the chunk's
// offset, then reads every chunk back in another order and compares. A
// chunk that reads back differently fails the device; the other devices
// still finish. Every device is opened through the guard.
func Disks(ctx context.Context, g *blockdev.Guard, devices []string, opts DiskOptions) (map[string]DiskResult, error) {
	results := make(map[string]DiskResult, len(devices))
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(devices))
	for i, dev := range devices {
		wg.Go(func() {
			r, err := burnDisk(ctx, g, dev, opts)
			mu.Lock()
			results[dev] = r
			mu.Unlock()
			errs[i] = err
		})
	}
	wg.Wait()
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	switch len(failed) {
	case 0:
		return results, nil
	case 1:
		return results, failed[0]
	}
	return results, fmt.Errorf("%d devices failed: %w", len(failed), errors.Join(failed...))
}

func burnDisk(ctx context.Context, g *blockdev.Guard, dev string, opts DiskOptions) (res DiskResult, err error) {
	d, err := blockdev.Open(g, dev)
	if err != nil {
		return res, err
	}
	defer d.Close()
	chunks := d.Size / diskChunk
	if chunks == 0 {
		return res, fmt.Errorf("%s: %d bytes, less than one 1 MiB chunk", dev, d.Size)
	}
	buf, free, err := blockdev.AlignedBuffer(diskChunk)
	if err != nil {
		return res, err
	}
	defer free()
	want := make([]byte, diskChunk)
	start := time.Now()
	deadline := time.Time{}
	if opts.Runtime > 0 {
		deadline = start.Add(opts.Runtime)
	}
	timeUp := func() bool { return !deadline.IsZero() && time.Now().After(deadline) }
	defer func() { res.Seconds = time.Since(start).Seconds() }()
	for pass := 0; opts.Runtime > 0 || pass < opts.Loops; pass++ {
		seed := uint64(time.Now().UnixNano()) ^ uint64(pass)<<32
		order := newPermutation(chunks, seed)
		written := int64(0)
		for ; written < chunks; written++ {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			if timeUp() {
				break
			}
			c := order.at(written)
			fillChunk(buf, seed, c)
			if _, err := d.File.WriteAt(buf, c*diskChunk); err != nil {
				return res, fmt.Errorf("%s: pass %d: write at %d: %w", dev, pass+1, c*diskChunk, err)
			}
			res.BytesWritten += diskChunk
		}
		if err := d.File.Sync(); err != nil {
			return res, fmt.Errorf("%s: pass %d: flush: %w", dev, pass+1, err)
		}
		// Verified in a second order over the chunks this pass wrote.
		check := newPermutation(written, ^seed)
		for i := int64(0); i < written; i++ {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			c := order.at(check.at(i))
			if _, err := d.File.ReadAt(buf, c*diskChunk); err != nil {
				return res, fmt.Errorf("%s: pass %d: read at %d: %w", dev, pass+1, c*diskChunk, err)
			}
			fillChunk(want, seed, c)
			if !bytes.Equal(buf, want) {
				off := 0
				for off < diskChunk && buf[off] == want[off] {
					off++
				}
				return res, fmt.Errorf("%s: pass %d: verify failed: byte %d reads %#02x, %#02x was written", dev, pass+1, c*diskChunk+int64(off), buf[off], want[off])
			}
			res.BytesVerified += diskChunk
		}
		res.Passes++
		if written < chunks || timeUp() {
			break
		}
	}
	return res, nil
}

// fillChunk fills b with the data of chunk c in the pass of seed: a
// ChaCha8 stream keyed by both, so every chunk differs from every other
// and from the previous pass.
func fillChunk(b []byte, seed uint64, c int64) {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	binary.LittleEndian.PutUint64(key[8:], uint64(c))
	r := rand.NewChaCha8(key)
	_, _ = r.Read(b)
}

// permutation maps 0..n-1 onto itself as i -> (a*i + b) mod n with a
// prime to n: a pseudo-random order over any number of chunks without a
// table.
type permutation struct{ n, a, b int64 }

func newPermutation(n int64, seed uint64) permutation {
	if n <= 1 {
		return permutation{n: max(n, 1), a: 1}
	}
	r := rand.New(rand.NewPCG(seed, seed>>1|1))
	a := r.Int64N(n-1) + 1
	for gcd(a, n) != 1 {
		a = a%(n-1) + 1
	}
	return permutation{n: n, a: a, b: r.Int64N(n)}
}

func (p permutation) at(i int64) int64 {
	// A 128-bit product, so no size overflows; hi < n since a, i < n.
	hi, lo := bits.Mul64(uint64(p.a), uint64(i))
	_, rem := bits.Div64(hi, lo, uint64(p.n))
	return int64((rem + uint64(p.b)) % uint64(p.n))
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
