package netbed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// LACP actor state bits (IEEE 802.1AX 6.4.2.3).
const (
	LACPActivity     = 1 << 0
	LACPShortTimeout = 1 << 1
	LACPAggregation  = 1 << 2
	LACPSync         = 1 << 3
	LACPCollecting   = 1 << 4
	LACPDistributing = 1 << 5
)

// BondSwitch is the switch side of a VM's bonded NICs, played in user
// space because the kernels these tests run on may have no bonding driver
// (so no Linux bond in a namespace can be the partner): its ports, one per
// VM NIC, form one link aggregation whose LACP partner it plays (each
// LACPDU from the VM is answered at once with this switch in sync,
// collecting and distributing, and a short timeout so the VM sends one a
// second; and one a second of its own), and it forwards frames between the aggregation and one tap,
// adding and removing 802.1Q tag vid (0: untagged). Frames to the VM go
// out of the port the VM last sent a frame from, as a switch learns one
// host's MAC; a port cut with SetPort carries nothing, as a cable pulled
// on the switch's side. The VM reaches each port over a stream socket (a
// NIC with backend "stream" and its File).
type BondSwitch struct {
	ports []*bondPort
	tap   *os.File
	vid   uint16
	lacp  bool
	last  atomic.Int32
	wg    sync.WaitGroup
	done  chan struct{}

	// Counts, for a test's log.
	LACPIn, LACPOut, FramesIn, FramesOut, Dropped atomic.Int64
}

type bondPort struct {
	conn  net.Conn
	up    atomic.Bool
	state atomic.Int32 // the VM's actor state from its last LACPDU; -1 before one
	pdu   atomic.Pointer[[]byte]
	mu    sync.Mutex
	seen  []byte // the VM's actor states, each once, in order
	wmu   sync.Mutex
	mac   net.HardwareAddr
}

// StartBondSwitch starts a switch of n ports in front of tap, a tap file
// as NewNetns makes it (the switch reads and writes a duplicate). It
// returns the files of the VM's NICs, in port order, to close once QEMU
// has started. With lacp false it answers no LACPDU (a switch without
// LACP, for active-backup bonds). Close stops it.
func StartBondSwitch(n int, tap *os.File, vid uint16, lacp bool) (*BondSwitch, []*os.File, error) {
	if vid > 4094 {
		return nil, nil, fmt.Errorf("netbed: bond switch VLAN %d is not from 0 to 4094", vid)
	}
	s := &BondSwitch{vid: vid, lacp: lacp, done: make(chan struct{})}
	var qemuEnds []*os.File
	fail := func(err error) (*BondSwitch, []*os.File, error) {
		s.Close()
		for _, f := range qemuEnds {
			f.Close()
		}
		return nil, nil, err
	}
	t, err := pollable(tap)
	if err != nil {
		return fail(err)
	}
	s.tap = t
	for i := range n {
		qemuEnd, conn, err := streamPair(fmt.Sprintf("bond-port-%d", i))
		if err != nil {
			return fail(err)
		}
		qemuEnds = append(qemuEnds, qemuEnd)
		p := &bondPort{conn: conn, mac: net.HardwareAddr{0x02, 0, 0, 0, 0xbe, byte(i + 1)}}
		p.up.Store(true)
		p.state.Store(-1)
		s.ports = append(s.ports, p)
	}
	for i := range s.ports {
		s.wg.Go(func() { _ = s.fromVM(i) })
	}
	s.wg.Go(func() { _ = s.toVM() })
	if lacp {
		s.wg.Go(s.periodic)
	}
	return s, qemuEnds, nil
}

// streamPair makes a connected stream socket pair: one end for QEMU (a
// "socket" netdev's fd), the other ours.
func streamPair(name string) (*os.File, net.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("netbed: %s socket pair: %w", name, err)
	}
	qemuEnd := os.NewFile(uintptr(fds[0]), name+"-qemu")
	ours := os.NewFile(uintptr(fds[1]), name)
	conn, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		qemuEnd.Close()
		return nil, nil, fmt.Errorf("netbed: %s socket: %w", name, err)
	}
	return qemuEnd, conn, nil
}

// readStreamFrame reads one frame of QEMU's stream netdev protocol (a
// 4-byte big-endian length, the frame) into buf.
func readStreamFrame(r io.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > len(buf) {
		return nil, fmt.Errorf("netbed: a %d-byte frame from the VM", n)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// streamFrame is f framed for QEMU's stream netdev.
func streamFrame(f []byte) []byte {
	out := make([]byte, 4, 4+len(f))
	binary.BigEndian.PutUint32(out, uint32(len(f)))
	return append(out, f...)
}

// SetPort connects (up) or cuts port i.
func (s *BondSwitch) SetPort(i int, up bool) { s.ports[i].up.Store(up) }

// ActorState is the LACP actor state the VM sent last on port i (see the
// LACP* bits), false before any LACPDU.
func (s *BondSwitch) ActorState(i int) (byte, bool) {
	st := s.ports[i].state.Load()
	return byte(st), st >= 0
}

// ActorStates are the LACP actor states the VM has sent on port i, each
// once, in the order they came.
func (s *BondSwitch) ActorStates(i int) []byte {
	p := s.ports[i]
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// LastLACPDU is the VM's last LACPDU on port i (from the subtype on), nil
// before one.
func (s *BondSwitch) LastLACPDU(i int) []byte {
	if b := s.ports[i].pdu.Load(); b != nil {
		return *b
	}
	return nil
}

// LastPort is the port the VM last sent a data frame from.
func (s *BondSwitch) LastPort() int { return int(s.last.Load()) }

// Close stops the switch and waits for it; the tap stays open.
func (s *BondSwitch) Close() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	for _, p := range s.ports {
		p.conn.Close()
	}
	if s.tap != nil {
		s.tap.Close()
	}
	s.wg.Wait()
}

const (
	etherTypeSlow = 0x8809 // IEEE 802.3 Slow Protocols: LACP is subtype 1
	etherTypeVLAN = 0x8100
	lacpduLen     = 110 // after the Ethernet header
)

func (s *BondSwitch) fromVM(i int) error {
	p := s.ports[i]
	buf := make([]byte, 65536)
	for {
		f, err := readStreamFrame(p.conn, buf)
		if err != nil {
			return err
		}
		if len(f) < 14 {
			continue
		}
		if !p.up.Load() {
			s.Dropped.Add(1)
			continue
		}
		et := binary.BigEndian.Uint16(f[12:])
		if et == etherTypeSlow {
			if len(f) >= 14+lacpduLen && f[14] == 1 {
				s.LACPIn.Add(1)
				p.state.Store(int32(f[14+18]))
				p.mu.Lock()
				if !slices.Contains(p.seen, f[14+18]) {
					p.seen = append(p.seen, f[14+18])
				}
				p.mu.Unlock()
				last := append([]byte(nil), f[14:14+lacpduLen]...)
				p.pdu.Store(&last)
				if s.lacp {
					s.send(p, lacpReply(f[14:], p.mac, uint16(i+1)))
					s.LACPOut.Add(1)
				}
			}
			continue
		}
		if s.vid != 0 {
			if et != etherTypeVLAN || len(f) < 18 || binary.BigEndian.Uint16(f[14:])&0xfff != s.vid {
				s.Dropped.Add(1)
				continue
			}
			f = append(f[:12:12], f[16:]...)
		}
		s.last.Store(int32(i))
		s.FramesIn.Add(1)
		_, _ = s.tap.Write(f) // a full tap queue drops the frame, as a wire would
	}
}

func (s *BondSwitch) toVM() error {
	buf := make([]byte, 65536)
	for {
		n, err := s.tap.Read(buf)
		if err != nil {
			return err
		}
		f := buf[:n]
		if s.vid != 0 && n >= 14 {
			f = append(append(append([]byte{}, f[:12]...), 0x81, 0x00, byte(s.vid>>8), byte(s.vid)), f[12:]...)
		}
		p := s.ports[s.last.Load()]
		if !p.up.Load() {
			// The learned port is cut: flood to the first live one,
			// as a switch does once the MAC's port goes down.
			p = nil
			for _, q := range s.ports {
				if q.up.Load() {
					p = q
					break
				}
			}
			if p == nil {
				s.Dropped.Add(1)
				continue
			}
		}
		if err := s.send(p, f); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		s.FramesOut.Add(1)
	}
}

// periodic sends an LACPDU on every live port each second, as a partner
// with a short timeout must: a reply the VM missed (its first LACPDU goes
// out as the port joins the bond) would otherwise wait for the VM's next
// one, 30 s later at its slow rate. Before the VM has spoken on a port,
// the partner fields are empty.
func (s *BondSwitch) periodic() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		for i, p := range s.ports {
			if !p.up.Load() {
				continue
			}
			pdu := make([]byte, lacpduLen)
			if last := p.pdu.Load(); last != nil {
				pdu = *last
			}
			if s.send(p, lacpReply(pdu, p.mac, uint16(i+1))) == nil {
				s.LACPOut.Add(1)
			}
		}
	}
}

func (s *BondSwitch) send(p *bondPort, f []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_, err := p.conn.Write(streamFrame(f))
	return err
}

// lacpReply is the LACPDU answering pdu (the VM's, from the subtype on):
// the switch as actor (system 02:00:00:00:be:00, key 1, this port),
// aggregating, in sync, collecting and distributing, with a short
// timeout; the VM's own actor values as the partner, which is what makes
// the VM's mux machine see itself matched and in sync.
func lacpReply(pdu []byte, src net.HardwareAddr, port uint16) []byte {
	f := make([]byte, 14+lacpduLen)
	copy(f, []byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x02})
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], etherTypeSlow)
	b := f[14:]
	b[0], b[1] = 1, 1 // LACP, version 1
	b[2], b[3] = 1, 20
	binary.BigEndian.PutUint16(b[4:], 0x8000)
	copy(b[6:12], []byte{0x02, 0, 0, 0, 0xbe, 0})
	binary.BigEndian.PutUint16(b[12:], 1)
	binary.BigEndian.PutUint16(b[14:], 0x80)
	binary.BigEndian.PutUint16(b[16:], port)
	b[18] = LACPActivity | LACPShortTimeout | LACPAggregation | LACPSync | LACPCollecting | LACPDistributing
	b[22], b[23] = 2, 20
	copy(b[24:39], pdu[4:19]) // the VM's actor: priority, system, key, port priority, port, state
	b[42], b[43] = 3, 16
	binary.BigEndian.PutUint16(b[44:], 0) // collector max delay
	return f
}
