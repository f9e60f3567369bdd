package image

import (
	"fmt"
	"hash"
	"io"
	"strings"
	"sync/atomic"
	"time"
)

// StageTimes says where an image write's time went. The stages overlap
// (the download, the hash and the writes run in their own goroutines), so
// they do not add up to the whole; the largest one is what held the
// write back, and a large BufferWait means the disk or the hash was
// slower than the download.
type StageTimes struct {
	// Receive is the time spent in the source's reads: waiting for the
	// network (or the file) and copying what arrived.
	Receive time.Duration
	// Reads is how many reads of the source that took.
	Reads int64
	// Decode is the time the producer spent converting qcow2 or
	// decompressing, and copying what it hashes, outside the source's
	// reads and its waits (0 for plain raw images).
	Decode time.Duration
	// Hash is the time spent hashing, whichever goroutine did it.
	Hash time.Duration
	// HashImpl names the code that hashed (SHA-256 has two).
	HashImpl string
	// BufferWait is the time the producer waited for a free write buffer,
	// a place in the writer's queue or the hash to catch up.
	BufferWait time.Duration
	// Write is the time of the device writes and zero-outs, summed over
	// the writeDepth that run at once.
	Write time.Duration
	// Sync is the final fsync and partition table re-read.
	Sync time.Duration
	// CPU is what the whole agent process spent over the write: user and
	// system time and context switches, from getrusage (zero where it
	// could not be read). Where the CPU, not the disk or the network,
	// sets the pace (an emulated machine), it says what a byte costs.
	CPU processCPU
}

// processCPU is a process's CPU time and context switches.
type processCPU struct {
	User, System time.Duration
	Switches     int64 // voluntary and involuntary
}

// String is the stages for a log line.
func (s StageTimes) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "receive %.1fs (%d reads)", s.Receive.Seconds(), s.Reads)
	if s.Decode > 0 {
		fmt.Fprintf(&b, ", decode %.1fs", s.Decode.Seconds())
	}
	fmt.Fprintf(&b, ", hash %.1fs", s.Hash.Seconds())
	if s.HashImpl != "" {
		fmt.Fprintf(&b, " (%s)", s.HashImpl)
	}
	fmt.Fprintf(&b, ", waiting on the disk or the hash %.1fs, device writes %.1fs (%d at once), fsync %.1fs",
		s.BufferWait.Seconds(), s.Write.Seconds(), writeDepth, s.Sync.Seconds())
	if s.CPU != (processCPU{}) {
		fmt.Fprintf(&b, "; agent CPU %.1fs user, %.1fs system, %d context switches",
			s.CPU.User.Seconds(), s.CPU.System.Seconds(), s.CPU.Switches)
	}
	return b.String()
}

// stageClock adds up stage times from several goroutines.
type stageClock struct {
	receive, hash, bufferWait, write atomic.Int64 // nanoseconds
	reads                            atomic.Int64
	// cpu0 is the process's CPU at the write's start (startStageClock).
	cpu0   processCPU
	cpuSet bool
}

// startStageClock is a write's clock, noting the process's CPU use at
// the write's start.
func startStageClock() *stageClock {
	c := &stageClock{}
	c.cpu0, c.cpuSet = readProcessCPU()
	return c
}

// since adds the time since start to d.
func since(d *atomic.Int64, start time.Time) {
	d.Add(int64(time.Since(start)))
}

// timedReader counts r's reads and the time spent in them.
type timedReader struct {
	r     io.Reader
	d     *atomic.Int64
	reads *atomic.Int64
}

func (t timedReader) Read(p []byte) (int, error) {
	start := time.Now()
	n, err := t.r.Read(p)
	since(t.d, start)
	t.reads.Add(1)
	return n, err
}

// timedHash counts the time spent in h's writes into d.
type timedHash struct {
	hash.Hash
	d *atomic.Int64
}

func (t timedHash) Write(p []byte) (int, error) {
	start := time.Now()
	n, err := t.Hash.Write(p)
	since(t.d, start)
	return n, err
}

// times reads the clock once the write is done. copyTime is the
// producer's time from the first image byte to the last; decoding says
// the producer had to convert or decompress what it read.
func (c *stageClock) times(copyTime, sync time.Duration, decoding bool, hashImpl string) StageTimes {
	s := StageTimes{
		Receive:    time.Duration(c.receive.Load()),
		Reads:      c.reads.Load(),
		Hash:       time.Duration(c.hash.Load()),
		HashImpl:   hashImpl,
		BufferWait: time.Duration(c.bufferWait.Load()),
		Write:      time.Duration(c.write.Load()),
		Sync:       sync,
	}
	if now, ok := readProcessCPU(); ok && c.cpuSet {
		s.CPU = processCPU{User: now.User - c.cpu0.User, System: now.System - c.cpu0.System, Switches: now.Switches - c.cpu0.Switches}
	}
	if decoding {
		// Whatever else the producer did between its reads and its
		// waits was decoding and copying.
		s.Decode = max(0, copyTime-s.Receive-s.BufferWait)
	}
	return s
}
