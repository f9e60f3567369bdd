package netbed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Trunk is an 802.1Q switch port played in user space, for hosts whose
// kernel has no VLAN devices: frames from the VM tagged with the VLAN go,
// untagged, to the tagged side's tap; untagged frames to the native tap;
// frames from the taps go back to the VM tagged or as they are. Frames of
// other VLANs are dropped. QEMU reaches it over a stream socket (a NIC
// with backend "stream"), each frame after its 4-byte big-endian length.
type Trunk struct {
	vm             net.Conn
	native, tagged *os.File
	vid            uint16
	mu             sync.Mutex // one frame at a time to the VM
	wg             sync.WaitGroup

	// Frames counted, for a test's log.
	TaggedIn, TaggedOut, OtherVLAN atomic.Int64
}

// StartTrunk starts the port between native and tagged, tap files (as
// NewNetns makes them) that the trunk reads and writes, and vid. It
// returns the file to pass as Options.Tap, to be closed once the VM has
// started. Close stops it.
func StartTrunk(native, tagged *os.File, vid uint16) (*Trunk, *os.File, error) {
	if vid < 1 || vid > 4094 {
		return nil, nil, fmt.Errorf("netbed: trunk VLAN %d is not from 1 to 4094", vid)
	}
	qemuEnd, conn, err := streamPair("trunk")
	if err != nil {
		return nil, nil, err
	}
	tr := &Trunk{vm: conn, vid: vid}
	for _, p := range []struct {
		from **os.File
		f    *os.File
	}{{&tr.native, native}, {&tr.tagged, tagged}} {
		if *p.from, err = pollable(p.f); err != nil {
			tr.Close()
			qemuEnd.Close()
			return nil, nil, err
		}
	}
	tr.wg.Go(func() { _ = tr.fromVM() })
	tr.wg.Go(func() { _ = tr.toVM(tr.native, false) })
	tr.wg.Go(func() { _ = tr.toVM(tr.tagged, true) })
	return tr, qemuEnd, nil
}

// Close stops the trunk and waits for it; the taps stay open.
func (tr *Trunk) Close() {
	tr.vm.Close()
	for _, f := range []*os.File{tr.native, tr.tagged} {
		if f != nil {
			f.Close()
		}
	}
	tr.wg.Wait()
}

// pollable returns a non-blocking duplicate of a tap file, so that a
// pending Read ends when the duplicate is closed.
func pollable(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("netbed: trunk tap: %w", err)
	}
	fd := -1
	var derr error
	if err := rc.Control(func(p uintptr) { fd, derr = unix.Dup(int(p)) }); err != nil || derr != nil {
		return nil, fmt.Errorf("netbed: trunk tap: %w", errors.Join(err, derr))
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netbed: trunk tap: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

func (tr *Trunk) fromVM() error {
	buf := make([]byte, 65536)
	for {
		f, err := readStreamFrame(tr.vm, buf)
		if err != nil {
			return err
		}
		if len(f) < 14 {
			continue
		}
		out := tr.native
		if binary.BigEndian.Uint16(f[12:]) == 0x8100 {
			if len(f) < 18 || binary.BigEndian.Uint16(f[14:])&0xfff != tr.vid {
				tr.OtherVLAN.Add(1)
				continue
			}
			tr.TaggedIn.Add(1)
			f = append(f[:12:12], f[16:]...)
			out = tr.tagged
		}
		_, _ = out.Write(f) // a full tap queue drops the frame, as a wire would
	}
}

func (tr *Trunk) toVM(from *os.File, tag bool) error {
	buf := make([]byte, 65536)
	for {
		n, err := from.Read(buf)
		if err != nil {
			return err
		}
		f := buf[:n]
		if tag && n >= 14 {
			f = append(append(append([]byte{}, f[:12]...), 0x81, 0x00, byte(tr.vid>>8), byte(tr.vid)), f[12:]...)
			tr.TaggedOut.Add(1)
		}
		tr.mu.Lock()
		_, err = tr.vm.Write(streamFrame(f))
		tr.mu.Unlock()
		if err != nil {
			return err
		}
	}
}
