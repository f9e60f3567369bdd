package lldp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/inventory"
)

// DefaultTimeout is IPA's ipa-lldp-timeout.
const DefaultTimeout = 30 * time.Second

// maxFrame bounds one received frame. An LLDPDU fits a standard 1500-byte
// payload; the room for a jumbo frame only avoids cutting a non-standard one
// short (IPA reads 1600 bytes).
const maxFrame = 9216

// Capture listens for LLDP on every named interface at once and returns the
// TLVs of the first frame each one hears (ParseFrame). It returns as soon as
// every interface has heard a frame, or when timeout passes or ctx ends;
// an interface that heard nothing by then gets an empty list, as in IPA.
//
// Instead of IPA's interface-wide promiscuous mode, each socket joins the
// LLDP multicast group, which the kernel drops with the socket. An
// interface that is administratively down is brought up for the capture and
// put down again afterwards; on Intel i40e NICs the firmware's own LLDP agent,
// which would consume the frames, is stopped first (see stopFirmwareLLDP).
//
// An interface that cannot be listened on (missing, no permission) is left
// out of the map and named in the returned error; the map still holds every
// other interface. If ctx ends first, the map holds what was heard and the
// error includes ctx.Err().
//
// All sockets are opened on the calling goroutine, so a caller that has
// entered a network namespace on a locked OS thread captures in it.
func Capture(ctx context.Context, ifaces []string, timeout time.Duration, logger *slog.Logger) (map[string][]inventory.LLDPTLV, error) {
	logger = logging.OrDiscard(logger)
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	start := time.Now()
	deadline := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}

	var errs []error
	fw := stopFirmwareLLDP(ctx, "/", ifaces, newEthtoolFlags, logger)
	defer fw.restore()

	ctl, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("lldp: socket for interface flags: %w", err)
	}
	defer unix.Close(ctl)

	var listeners []*listener
	defer func() {
		for _, l := range listeners {
			l.close(ctl, logger)
		}
	}()
	seen := map[string]bool{}
	for _, name := range ifaces {
		if seen[name] {
			continue
		}
		seen[name] = true
		l, err := listen(ctl, name, deadline, logger)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		listeners = append(listeners, l)
	}

	got := make(map[string][]inventory.LLDPTLV, len(listeners))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, l := range listeners {
		wg.Go(func() {
			frame, err := l.first()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				got[l.name] = ParseFrame(frame)
				logger.Info(EventFrameReceived, "interface", l.name, "bytes", len(frame),
					"after", time.Since(start).Round(time.Millisecond))
			case errors.Is(err, os.ErrDeadlineExceeded):
				got[l.name] = []inventory.LLDPTLV{}
			default:
				got[l.name] = []inventory.LLDPTLV{}
				errs = append(errs, fmt.Errorf("lldp: reading from %s: %w", l.name, err))
			}
		})
	}
	// Cancellation wakes every reader by moving its deadline to now.
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			for _, l := range listeners {
				_ = l.conn.SetReadDeadline(time.Now())
			}
		case <-done:
		}
	}()
	wg.Wait()
	close(done)
	<-stopped

	var silent []string
	for _, l := range listeners {
		if len(got[l.name]) == 0 {
			silent = append(silent, l.name)
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, fmt.Errorf("lldp: capture interrupted after %v: %w", time.Since(start).Round(time.Millisecond), err))
	} else if len(silent) > 0 {
		logger.Warn("no LLDP frame before the timeout", "interfaces", silent, "timeout", timeout)
	}
	return got, errors.Join(errs...)
}

// listener is one interface's LLDP socket and what must be undone after it.
type listener struct {
	name    string
	conn    *packet.Conn
	wasDown bool
}

// listen opens the LLDP socket of one interface, bringing the interface up
// first when it is administratively down.
func listen(ctl int, name string, deadline time.Time, logger *slog.Logger) (*listener, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("lldp: interface %s: %w", name, err)
	}
	l := &listener{name: name}
	if ifi.Flags&net.FlagUp == 0 {
		if err := setUp(ctl, name, true); err != nil {
			return nil, fmt.Errorf("lldp: bringing %s up for the capture: %w", name, err)
		}
		l.wasDown = true
		logger.Info("interface brought up for the LLDP capture", "interface", name)
	}
	conn, err := packet.Listen(ifi, packet.Raw, EtherType, nil)
	if err != nil {
		l.close(ctl, logger)
		return nil, fmt.Errorf("lldp: listening on %s: %w", name, err)
	}
	l.conn = conn
	// NICs that filter multicast in hardware pass the LLDP group only once
	// someone has joined it.
	if err := conn.JoinGroup(nearestBridge()); err != nil {
		l.close(ctl, logger)
		return nil, fmt.Errorf("lldp: joining the LLDP multicast group on %s: %w", name, err)
	}
	if err := conn.SetReadDeadline(deadline); err != nil {
		l.close(ctl, logger)
		return nil, fmt.Errorf("lldp: read deadline on %s: %w", name, err)
	}
	return l, nil
}

// first returns the first frame the socket receives.
func (l *listener) first() ([]byte, error) {
	buf := make([]byte, maxFrame)
	n, _, err := l.conn.ReadFrom(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// close closes the socket and puts the interface down again if it was.
func (l *listener) close(ctl int, logger *slog.Logger) {
	if l.conn != nil {
		_ = l.conn.Close()
		l.conn = nil
	}
	if l.wasDown {
		if err := setUp(ctl, l.name, false); err != nil {
			logger.Warn("could not put the interface down again after the LLDP capture", "interface", l.name, "error", err)
		}
		l.wasDown = false
	}
}

// setUp sets or clears IFF_UP, leaving the other interface flags alone.
func setUp(ctl int, name string, up bool) error {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(ctl, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS: %w", err)
	}
	flags := ifr.Uint16()
	if up {
		flags |= unix.IFF_UP
	} else {
		flags &^= unix.IFF_UP
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(ctl, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS: %w", err)
	}
	return nil
}
