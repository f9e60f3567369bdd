package burnin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ironic-go/ironic-agent/internal/clock"
)

// NetworkOptions are burnin_network's parameters: a pair of nodes where
// one writes and the other reads for a time, then the roles swap, as IPA
// runs fio's network engine (--ioengine net --port 9000 --numjobs 16;
// the writer --listen --time_based --runtime N, the reader --hostname
// partner reading until the writer closes). Either side may be fio:
// TestNetworkAgainstFio runs ours against fio's.
type NetworkOptions struct {
	// Role is this node's role in the first direction: "writer" or
	// "reader".
	Role string
	// Partner is the other node's address (the reader connects to it).
	Partner string
	// Runtime is how long the writer sends.
	Runtime time.Duration
	// Port is fio's --port (9000): job i uses Port+i, as fio numbers the
	// ports of numjobs. Listen is the address the writer listens on ("":
	// every address, as fio does).
	Port   int
	Listen string
	// Jobs is fio's --numjobs (16): parallel connections.
	Jobs int
	// ReaderRetry is how long a reader waits before trying a partner
	// that refused or did not answer again (IPA's NETWORK_READER_CYCLE,
	// 30 s); it retries until ctx ends, as IPA does.
	ReaderRetry time.Duration
}

// NetworkDirection is one half of the burn-in.
type NetworkDirection struct {
	Role        string  `json:"role"`
	Partner     string  `json:"partner"`
	Bytes       int64   `json:"bytes"`
	Seconds     float64 `json:"seconds"`
	Connections int     `json:"connections"`
}

// Network runs both directions: opts.Role first, then the other.
func Network(ctx context.Context, opts NetworkOptions) ([]NetworkDirection, error) {
	if opts.Role != "writer" && opts.Role != "reader" {
		return nil, fmt.Errorf("unknown role %q (writer or reader)", opts.Role)
	}
	if opts.Partner == "" {
		return nil, errors.New("no partner")
	}
	if opts.Jobs <= 0 {
		opts.Jobs = 16
	}
	var out []NetworkDirection
	for _, writer := range []bool{opts.Role == "writer", opts.Role != "writer"} {
		var d NetworkDirection
		var err error
		if writer {
			d, err = netWrite(ctx, opts, nil)
		} else {
			d, err = netRead(ctx, opts, nil)
		}
		out = append(out, d)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// netWrite accepts one connection on each of the opts.Jobs ports (fio's
// numjobs use ports port, port+1, ...), then sends pseudo-random data on
// each until opts.Runtime is over and closes them. listening, if not nil,
// is called once every port listens: a test starts a reader that does
// not retry (fio's) then.
func netWrite(ctx context.Context, opts NetworkOptions, listening func()) (NetworkDirection, error) {
	d := NetworkDirection{Role: "writer", Partner: opts.Partner}
	var lc net.ListenConfig
	var lns []net.Listener
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	for i := range opts.Jobs {
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(opts.Listen, strconv.Itoa(opts.Port+i)))
		if err != nil {
			closeAll()
			return d, fmt.Errorf("writer: %w", err)
		}
		lns = append(lns, ln)
	}
	if listening != nil {
		listening()
	}
	stop := context.AfterFunc(ctx, closeAll)
	conns := make([]net.Conn, len(lns))
	acceptErrs := make([]error, len(lns))
	var accepting sync.WaitGroup
	for i, ln := range lns {
		accepting.Go(func() { conns[i], acceptErrs[i] = ln.Accept() })
	}
	accepting.Wait()
	stop()
	closeAll()
	if err := errors.Join(acceptErrs...); err != nil {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		if ctx.Err() != nil {
			return d, ctx.Err()
		}
		return d, fmt.Errorf("writer: accept on ports %d-%d: %w", opts.Port, opts.Port+opts.Jobs-1, err)
	}
	d.Connections = len(conns)
	start := time.Now()
	run, cancel := context.WithTimeout(ctx, opts.Runtime)
	defer cancel()
	var sent atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, len(conns))
	for i, c := range conns {
		wg.Go(func() {
			defer c.Close()
			// Only an abort cuts a write short: when the time is up the
			// last buffer goes out whole, since fio's reader expects whole
			// blocks (4 KiB) and spins on a partial one.
			stopConn := context.AfterFunc(ctx, func() { c.SetWriteDeadline(time.Now()) })
			defer stopConn()
			buf := make([]byte, 128<<10)
			r := rand.NewChaCha8([32]byte{byte(i)})
			for run.Err() == nil {
				_, _ = r.Read(buf)
				n, err := c.Write(buf)
				sent.Add(int64(n))
				if err != nil && ctx.Err() == nil {
					errs[i] = fmt.Errorf("writer: connection %d to %s: %w", i, c.RemoteAddr(), err)
					return
				}
			}
			if ctx.Err() == nil {
				// fio's reader ends on this message, not on the close.
				if _, err := c.Write(fioCloseMessage()); err != nil {
					errs[i] = fmt.Errorf("writer: connection %d to %s: close message: %w", i, c.RemoteAddr(), err)
				}
			}
		})
	}
	wg.Wait()
	d.Bytes, d.Seconds = sent.Load(), time.Since(start).Seconds()
	if err := ctx.Err(); err != nil {
		return d, err
	}
	return d, errors.Join(errs...)
}

// fioCloseMessage is what fio's net engine sends before closing a link
// (engines/net.c fio_netio_send_close): magic "link" (0x6c696e6b) and
// FIO_LINK_CLOSE (0x89), little-endian 32-bit words. A fio reader waits
// for it and spins on a bare end of stream.
func fioCloseMessage() []byte {
	return []byte{0x6b, 0x6e, 0x69, 0x6c, 0x89, 0, 0, 0}
}

// netRead connects to the partner's opts.Jobs ports and reads each
// connection until the writer closes it (fio's close message, the last 8
// bytes, counts as data). A port that is not listening yet is tried again
// after opts.ReaderRetry, and the connections already made are kept, as
// each of fio's reader jobs retries its own port: the writer listens on
// its ports one after the other and accepts the first connection of
// each, so a connection closed and made again would leave the writer
// the closed one (it writes into a broken pipe) and the new one unaccepted
// (reset when the writer stops listening). refused, if not nil, is called
// each time job's port refuses or does not answer, before the wait: a
// test opens the rest of its ports once the reader has met them closed.
func netRead(ctx context.Context, opts NetworkOptions, refused func(job int)) (NetworkDirection, error) {
	d := NetworkDirection{Role: "reader", Partner: opts.Partner}
	addr := func(i int) string { return net.JoinHostPort(opts.Partner, strconv.Itoa(opts.Port+i)) }
	var dialer net.Dialer
	var conns []net.Conn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for len(conns) < opts.Jobs {
		c, err := dialer.DialContext(ctx, "tcp", addr(len(conns)))
		if err == nil {
			conns = append(conns, c)
			continue
		}
		if ctx.Err() != nil {
			closeAll()
			return d, ctx.Err()
		}
		var ne net.Error
		if !errors.Is(err, syscall.ECONNREFUSED) && !(errors.As(err, &ne) && ne.Timeout()) {
			closeAll()
			return d, fmt.Errorf("reader: %w", err)
		}
		if refused != nil {
			refused(len(conns))
		}
		if clock.Sleep(ctx, opts.ReaderRetry) != nil {
			closeAll()
			return d, ctx.Err()
		}
	}
	d.Connections = len(conns)
	start := time.Now()
	var got atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, len(conns))
	for i, c := range conns {
		wg.Go(func() {
			defer c.Close()
			stopConn := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
			defer stopConn()
			n, err := io.Copy(io.Discard, c)
			got.Add(n)
			if err != nil && ctx.Err() == nil {
				errs[i] = fmt.Errorf("reader: connection from %s: %w", addr(i), err)
			}
		})
	}
	wg.Wait()
	d.Bytes, d.Seconds = got.Load(), time.Since(start).Seconds()
	if err := ctx.Err(); err != nil {
		return d, err
	}
	return d, errors.Join(errs...)
}
