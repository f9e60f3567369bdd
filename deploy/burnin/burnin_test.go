package burnin

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
)

// TestMain runs the tests in a private mount namespace: their mounts and
// loop devices go with the test binary, even when it is killed.
func TestMain(m *testing.M) { looptest.Main(m.Run) }

func TestCPU(t *testing.T) {
	res, err := CPU(context.Background(), CPUOptions{Workers: 2, Duration: 300 * time.Millisecond})
	if err != nil || res.Workers != 2 || res.Rounds == 0 || res.Seconds < 0.3 {
		t.Errorf("%+v %v", res, err)
	}
	// Aborted: an error, promptly.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, err := CPU(ctx, CPUOptions{Duration: time.Hour}); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("aborted run: %v after %v", err, time.Since(start))
	}
}

func TestParseVMBytes(t *testing.T) {
	for _, tc := range []struct {
		in      string
		workers int
		want    uint64
	}{{"98%", 2, 49 << 20}, {"50%", 1, 50 << 20}, {"4096", 3, 4096}, {"8m", 2, 8 << 20}, {"1G", 1, 1 << 30}, {"2k", 1, 2048}, {"7b", 1, 7}} {
		got, err := ParseVMBytes(tc.in, tc.workers, 100<<20)
		if err != nil || got != tc.want {
			t.Errorf("%q/%d: %d %v, want %d", tc.in, tc.workers, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "%", "0", "101%", "-1", "1x", "1.5G", "99999999999T"} {
		if _, err := ParseVMBytes(bad, 1, 100<<20); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestMemory(t *testing.T) {
	// How many passes fit in the time depends on the machine and its
	// load: none may.
	res, err := Memory(context.Background(), MemoryOptions{Workers: 2, Bytes: "8m", Duration: 300 * time.Millisecond, Available: 1 << 30, Reserve: 64 << 20})
	if err != nil || res.Workers != 2 || res.Bytes != 16<<20 || res.Seconds < 0.3 {
		t.Errorf("%+v %v", res, err)
	}
	// Passes are counted: the run is aborted once the workers have
	// completed two.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var passed atomic.Int32
	res, err = memory(ctx, MemoryOptions{Workers: 2, Bytes: "8m", Duration: time.Hour, Available: 1 << 30, Reserve: 64 << 20}, func() {
		if passed.Add(1) == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || res.Passes < 2 {
		t.Errorf("aborted after two passes: %+v %v", res, err)
	}
	// The share is capped below what is available less the reserve.
	res, err = Memory(context.Background(), MemoryOptions{Workers: 1, Bytes: "1G", Duration: 100 * time.Millisecond, Available: 80 << 20, Reserve: 64 << 20})
	if err != nil || res.Bytes != 16<<20 {
		t.Errorf("capped: %+v %v", res, err)
	}
	if _, err := Memory(context.Background(), MemoryOptions{Workers: 1, Bytes: "1G", Duration: time.Second, Available: 64 << 20, Reserve: 64 << 20}); err == nil {
		t.Errorf("ran with nothing available")
	}
}

func TestMemoryVerifyFindsAFlippedWord(t *testing.T) {
	words := make([]uint64, 1000)
	calls := 0
	flaky := func(i int) uint64 {
		calls++
		if calls == len(words)+500 { // the read-back of word 499 expects another value
			return 1
		}
		return uint64(i) * 3
	}
	err := fillAndVerify(context.Background(), words, flaky, 0)
	if err == nil || !strings.Contains(err.Error(), "word at offset 0xf98") {
		t.Errorf("%v", err)
	}
	if err := fillAndVerify(context.Background(), words, nil, 42); err != nil {
		t.Errorf("random pattern: %v", err)
	}
}

func TestPermutation(t *testing.T) {
	for _, n := range []int64{1, 2, 3, 10, 97, 1000} {
		p := newPermutation(n, uint64(n)*7)
		seen := make(map[int64]bool)
		for i := range n {
			v := p.at(i)
			if v < 0 || v >= n || seen[v] {
				t.Fatalf("n=%d: at(%d)=%d repeats or is out of range", n, i, v)
			}
			seen[v] = true
		}
	}
}

func TestDisksOnLoop(t *testing.T) {
	a := looptest.Attach(t, 8<<20)
	b := looptest.Attach(t, 4<<20)
	g := blockdev.NewGuard([]string{a, b})
	res, err := Disks(context.Background(), g, []string{a, b}, DiskOptions{Loops: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[a]; r.Passes != 2 || r.BytesWritten != 16<<20 || r.BytesVerified != 16<<20 {
		t.Errorf("%s: %+v", a, r)
	}
	if r := res[b]; r.Passes != 2 || r.BytesWritten != 8<<20 || r.BytesVerified != 8<<20 {
		t.Errorf("%s: %+v", b, r)
	}
	// The last pass's data is on the device.
	last := looptest.ReadAt(t, a, 0, 16)
	if string(last) == string(make([]byte, 16)) {
		t.Errorf("device still zero")
	}
	// Time-based: passes until the runtime is over, whatever loops says.
	res, err = Disks(context.Background(), g, []string{b}, DiskOptions{Loops: 1, Runtime: 500 * time.Millisecond})
	if err != nil || res[b].Seconds < 0.5 || res[b].BytesVerified == 0 {
		t.Errorf("time-based: %+v %v", res[b], err)
	}
	// A device outside the guard's list is refused, the others still run.
	other := looptest.Attach(t, 4<<20)
	res, err = Disks(context.Background(), g, []string{b, other}, DiskOptions{Loops: 1})
	if err == nil || !strings.Contains(err.Error(), other) || res[b].Passes != 1 {
		t.Errorf("unguarded device: %v %+v", err, res)
	}
	if got := looptest.ReadAt(t, other, 0, 4<<20); strings.Trim(string(got), "\x00") != "" {
		t.Errorf("the refused device %s was written", other)
	}
	// Aborted.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Disks(ctx, g, []string{a}, DiskOptions{Loops: 4}); err == nil {
		t.Errorf("cancelled run succeeded")
	}
}

func TestNetworkPair(t *testing.T) {
	// Free ports both sides use in turn, as two nodes use 9000-9015.
	port := netnstest.FreeTCPPorts(t, 4)
	opts := NetworkOptions{Partner: "127.0.0.1", Listen: "127.0.0.1", Port: port, Jobs: 4, Runtime: 300 * time.Millisecond, ReaderRetry: 50 * time.Millisecond}
	type result struct {
		dirs []NetworkDirection
		err  error
	}
	results := make(chan result, 2)
	for _, role := range []string{"reader", "writer"} {
		o := opts
		o.Role = role
		go func() {
			d, err := Network(context.Background(), o)
			results <- result{d, err}
		}()
	}
	for range 2 {
		r := <-results
		if r.err != nil || len(r.dirs) != 2 {
			t.Fatalf("%+v %v", r.dirs, r.err)
		}
		for _, d := range r.dirs {
			if d.Bytes == 0 || d.Connections != 4 {
				t.Errorf("%+v", d)
			}
		}
	}
	if _, err := Network(context.Background(), NetworkOptions{Role: "both", Partner: "x"}); err == nil {
		t.Errorf("unknown role accepted")
	}
	// A reader whose partner never comes stops when aborted.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	o := opts
	o.Role = "reader"
	if _, err := Network(ctx, o); err == nil {
		t.Errorf("reader without a partner succeeded")
	}
}

// A writer whose ports come up one after the other (the partner's agent
// still starting its jobs): the reader keeps the connections it made
// while it waits for the rest, so the connection the writer accepts on
// each port is the one the reader reads. Closing and redialling them all
// left the writer the closed ones (broken pipe) and the reader's new ones
// unaccepted (reset): TestBurninNetworkStep failed so once in a
// fresh-clone run.
func TestNetworkReaderKeepsItsConnections(t *testing.T) {
	const jobs = 4
	port := netnstest.FreeTCPPorts(t, jobs)
	opts := NetworkOptions{Partner: "127.0.0.1", Port: port, Jobs: jobs, ReaderRetry: 20 * time.Millisecond}
	listen := func(i int) net.Listener {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+i)))
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	var lns []net.Listener
	for i := range jobs / 2 {
		lns = append(lns, listen(i))
	}
	type result struct {
		d   NetworkDirection
		err error
	}
	done := make(chan result, 1)
	// Bounded: the old reader redialled a port the writer had stopped
	// listening on for ever.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The rest of the ports open once the reader has found the first of
	// them closed a few times, with its connections to the open half made.
	const refusals = 3
	var refused, refusedOpen atomic.Int32
	metClosed := make(chan struct{})
	go func() {
		d, err := netRead(ctx, opts, func(job int) {
			if job < jobs/2 {
				refusedOpen.Add(1)
			}
			if job == jobs/2 && refused.Add(1) == refusals {
				close(metClosed)
			}
		})
		done <- result{d, err}
	}()
	select {
	case <-metClosed:
	case r := <-done:
		t.Fatalf("the reader ended before it met the closed ports: %+v, %v", r.d, r.err)
	}
	for i := jobs / 2; i < jobs; i++ {
		lns = append(lns, listen(i))
	}
	var sent int64
	for _, ln := range lns {
		_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		msg := append(bytes.Repeat([]byte{7}, 64<<10), fioCloseMessage()...)
		if _, err := c.Write(msg); err != nil {
			t.Errorf("writing to the accepted connection from %s: %v", c.RemoteAddr(), err)
		}
		sent += int64(len(msg))
		c.Close()
	}
	r := <-done
	if r.err != nil || r.d.Bytes != sent || r.d.Connections != jobs {
		t.Errorf("reader: %+v, %v; want %d bytes over %d connections", r.d, r.err, sent, jobs)
	}
	if n := refusedOpen.Load(); n != 0 {
		t.Errorf("the reader was refused %d times on the ports that listened from the start", n)
	}
}
