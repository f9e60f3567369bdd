package burnin

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MemoryOptions are burnin_memory's parameters.
type MemoryOptions struct {
	// Workers is stress-ng's --vm N: 0 means one per online CPU.
	Workers int
	// Bytes is stress-ng's --vm-bytes: "N%" of the available memory
	// shared by the workers, or a size (suffix b, k, m, g, t: powers of
	// 1024) for each worker.
	Bytes string
	// Duration is how long the workers write and verify.
	Duration time.Duration
	// Available is the memory available to the burn-in
	// (/proc/meminfo MemAvailable); every worker's share together stays
	// below it less Reserve.
	Available uint64
	// Reserve is kept free for the agent and the kernel.
	Reserve uint64
}

// MemoryResult is what a memory burn-in did.
type MemoryResult struct {
	Workers int     `json:"workers"`
	Bytes   uint64  `json:"bytes"` // over all workers
	Seconds float64 `json:"seconds"`
	Passes  uint64  `json:"passes"` // verified write passes over all workers
}

// ParseVMBytes turns a --vm-bytes value into bytes per worker.
func ParseVMBytes(s string, workers int, available uint64) (uint64, error) {
	s = strings.TrimSpace(s)
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		p, err := strconv.ParseFloat(pct, 64)
		if err != nil || p <= 0 || p > 100 {
			return 0, fmt.Errorf("vm-bytes %q: want a percentage in (0, 100]", s)
		}
		return uint64(float64(available)*p/100) / uint64(workers), nil
	}
	mult := uint64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'b', 'B':
			s = s[:n-1]
		case 'k', 'K':
			mult, s = 1<<10, s[:n-1]
		case 'm', 'M':
			mult, s = 1<<20, s[:n-1]
		case 'g', 'G':
			mult, s = 1<<30, s[:n-1]
		case 't', 'T':
			mult, s = 1<<40, s[:n-1]
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("vm-bytes %q: want N%%, or a size with an optional b/k/m/g/t suffix", s)
	}
	return v * mult, nil
}

// Memory runs opts.Workers workers, each on its own mapping of its share
// of opts.Bytes, writing a pattern and verifying it pass after pass until
// opts.Duration is over: an address pattern, its inverse, walking ones and
// pseudo-random words. A word that reads back differently fails the run
// with the worker, offset and both values.
func Memory(ctx context.Context, opts MemoryOptions) (MemoryResult, error) {
	return memory(ctx, opts, nil)
}

// memory is Memory; passed, if not nil, is called after each pass a
// worker completes and counts.
func memory(ctx context.Context, opts MemoryOptions, passed func()) (MemoryResult, error) {
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	per, err := ParseVMBytes(opts.Bytes, workers, opts.Available)
	if err != nil {
		return MemoryResult{}, err
	}
	if limit := (opts.Available - min(opts.Available, opts.Reserve)) / uint64(workers); per > limit {
		per = limit
	}
	per &^= 7
	if per < 4096 {
		return MemoryResult{}, fmt.Errorf("%d bytes per worker: too little memory available (%d bytes, %d reserved)", per, opts.Available, opts.Reserve)
	}
	start := time.Now()
	var passes atomic.Uint64
	err = runWorkers(ctx, workers, opts.Duration, func(run context.Context, w int) error {
		return memoryWorker(run, w, per, &passes, passed)
	})
	return MemoryResult{Workers: workers, Bytes: per * uint64(workers), Seconds: time.Since(start).Seconds(), Passes: passes.Load()}, err
}

// chunkWords is how many words are written or checked between two looks
// at the context (1 MiB).
const chunkWords = 1 << 17

func memoryWorker(ctx context.Context, id int, size uint64, passes *atomic.Uint64, passed func()) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return fmt.Errorf("memory worker %d: mmap %d bytes: %w", id, size, err)
	}
	defer func() { _ = unix.Munmap(mem) }()
	words := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), len(mem)/8)
	for pass := uint64(0); ; pass++ {
		seed := pass*0x9e3779b97f4a7c15 + uint64(id)
		var pattern func(i int) uint64
		switch pass % 4 {
		case 0: // address in address
			pattern = func(i int) uint64 { return uint64(i)*0x9e3779b97f4a7c15 ^ seed }
		case 1: // its inverse: every bit flips
			pattern = func(i int) uint64 { return ^(uint64(i)*0x9e3779b97f4a7c15 ^ (seed - 0x9e3779b97f4a7c15)) }
		case 2: // walking ones
			pattern = func(i int) uint64 { return 1 << ((uint64(i) + seed) % 64) }
		default: // pseudo-random, regenerated to verify
			pattern = nil
		}
		if err := fillAndVerify(ctx, words, pattern, seed); err != nil {
			if errors.Is(err, errStopped) {
				return nil
			}
			return fmt.Errorf("memory worker %d, pass %d: %w", id, pass, err)
		}
		passes.Add(1)
		if passed != nil {
			passed()
		}
	}
}

var errStopped = errors.New("stopped")

// fillAndVerify writes pattern (or a PCG stream from seed when nil) over
// words, then reads every word back.
func fillAndVerify(ctx context.Context, words []uint64, pattern func(int) uint64, seed uint64) error {
	for _, verify := range []bool{false, true} {
		rng := rand.NewPCG(seed, ^seed)
		for base := 0; base < len(words); base += chunkWords {
			if ctx.Err() != nil {
				return errStopped
			}
			end := min(base+chunkWords, len(words))
			for i := base; i < end; i++ {
				var want uint64
				if pattern != nil {
					want = pattern(i)
				} else {
					want = rng.Uint64()
				}
				if !verify {
					words[i] = want
				} else if got := words[i]; got != want {
					return fmt.Errorf("word at offset %#x read %#016x, wrote %#016x", i*8, got, want)
				}
			}
		}
	}
	return nil
}
