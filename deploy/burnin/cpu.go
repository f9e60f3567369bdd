// Package burnin is IPA's burn-in steps written in Go, without stress-ng
// or fio: CPU (every CPU busy with checked computations for a time),
// memory (pattern write and verify over most of the available memory) and
// disk (a verified write and read of whole devices). Each run stops when
// its context ends and fails on the first wrong result.
package burnin

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// CPUOptions are burnin_cpu's parameters.
type CPUOptions struct {
	// Workers is stress-ng's --cpu N: 0 means one per online CPU.
	Workers int
	// Duration is how long every worker runs (stress-ng --timeout).
	Duration time.Duration
}

// CPUResult is what a CPU burn-in did.
type CPUResult struct {
	Workers int     `json:"workers"`
	Seconds float64 `json:"seconds"`
	// Rounds counts completed rounds of every method, over all workers.
	Rounds uint64 `json:"rounds"`
}

// cpuMethod is one computation with a result known in advance: a CPU that
// computes it wrongly fails the burn-in (stress-ng --verify).
type cpuMethod struct {
	name string
	run  func() uint64
}

// cpuMethods are the computations each worker cycles through, like
// stress-ng's --cpu-method all: integer, floating point, matrix, hashing
// and CRC work, so the ALUs, FPU, vector units and caches all run.
func cpuMethods() []cpuMethod {
	block := make([]byte, 4096)
	for i := range block {
		block[i] = byte(i * 7)
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	return []cpuMethod{
		{"sha256", func() uint64 {
			s := sha256.Sum256(block)
			for range 15 {
				s = sha256.Sum256(s[:])
			}
			return binary.LittleEndian.Uint64(s[:])
		}},
		{"crc32c", func() uint64 { return uint64(crc32.Checksum(block, table)) }},
		{"int64", func() uint64 {
			x := uint64(0x9e3779b97f4a7c15)
			var acc uint64
			for i := uint64(1); i < 20000; i++ {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				acc += x/i + x%(i|1)*3
			}
			return acc
		}},
		{"float64", func() uint64 {
			var s float64
			for i := 1; i < 20000; i++ {
				f := float64(i)
				s += math.Sqrt(f)*math.Sin(f) + math.Log(f)/f
			}
			return math.Float64bits(s)
		}},
		{"matrixprod", func() uint64 {
			const n = 32
			var a, b, c [n][n]float64
			for i := range n {
				for j := range n {
					a[i][j] = float64(i*n+j) / 7
					b[i][j] = float64(j*n+i) / 11
				}
			}
			for i := range n {
				for j := range n {
					var s float64
					for k := range n {
						s += a[i][k] * b[k][j]
					}
					c[i][j] = s
				}
			}
			var h uint64
			for i := range n {
				h = h*31 + math.Float64bits(c[i][(i*7)%n])
			}
			return h
		}},
		{"sieve", func() uint64 {
			const n = 50000
			composite := make([]bool, n)
			var count uint64
			for i := 2; i < n; i++ {
				if composite[i] {
					continue
				}
				count++
				for j := i * i; j < n; j += i {
					composite[j] = true
				}
			}
			return count
		}},
	}
}

// CPU keeps opts.Workers CPUs busy for opts.Duration, each on its own OS
// thread, cycling through the methods and checking every result against
// the one computed before the start.
func CPU(ctx context.Context, opts CPUOptions) (CPUResult, error) {
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	methods := cpuMethods()
	want := make([]uint64, len(methods))
	for i, m := range methods {
		want[i] = m.run()
	}
	var rounds atomic.Uint64
	start := time.Now()
	err := runWorkers(ctx, workers, opts.Duration, func(run context.Context, w int) error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for run.Err() == nil {
			for i, m := range methods {
				if got := m.run(); got != want[i] {
					return fmt.Errorf("CPU worker %d: method %s computed %#x, expected %#x", w, m.name, got, want[i])
				}
			}
			rounds.Add(1)
		}
		return nil
	})
	return CPUResult{Workers: workers, Seconds: time.Since(start).Seconds(), Rounds: rounds.Load()}, err
}

// runWorkers runs fn on n goroutines for d: the first error cancels the
// others and is returned. The time running out is success; the parent
// context ending first (the step aborted) is not.
func runWorkers(ctx context.Context, n int, d time.Duration, fn func(run context.Context, worker int) error) error {
	run, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range n {
		wg.Go(func() {
			if err := fn(run, w); err != nil && run.Err() == nil {
				errs <- err
				cancel()
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	return ctx.Err()
}
