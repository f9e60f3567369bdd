package netbed

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBondSwitch plays the VM's two NICs against the switch: an LACPDU is
// answered with the VM's actor values as the partner (and the switch
// sends its own each second), tagged frames of the
// VLAN reach the tap untagged, the tap's frames go tagged to the port the
// VM used last, and to the other one when that port is cut.
func TestBondSwitch(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	tap, peer := os.NewFile(uintptr(fds[0]), "tap"), os.NewFile(uintptr(fds[1]), "peer")
	defer tap.Close()
	defer peer.Close()
	sw, ends, err := StartBondSwitch(2, tap, 100, true)
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	var vm []net.Conn
	for _, f := range ends {
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		vm = append(vm, c)
	}
	_ = peer.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 2048)

	pdu := make([]byte, 14+lacpduLen)
	binary.BigEndian.PutUint16(pdu[12:], etherTypeSlow)
	actor := []byte{0x80, 0x00, 0x52, 0x54, 0, 0x12, 0x34, 0x61, 0, 9, 0, 0xff, 0, 1, LACPActivity | LACPAggregation}
	copy(pdu[14:], []byte{1, 1, 1, 20})
	copy(pdu[14+4:], actor)
	vm[0].Write(streamFrame(pdu))
	// The answer, or a periodic LACPDU sent after the VM's was seen.
	var reply []byte
	for reply == nil || bytes.Equal(reply[14+24:14+39], make([]byte, 15)) {
		if reply, err = readStreamFrame(vm[0], buf); err != nil {
			t.Fatal(err)
		}
	}
	if len(reply) != 14+lacpduLen || !bytes.Equal(reply[14+24:14+39], actor) || reply[14+18]&LACPDistributing == 0 {
		t.Errorf("LACP reply % x: want the VM's actor as partner and the switch distributing", reply)
	}
	if st, ok := sw.ActorState(0); !ok || st != LACPActivity|LACPAggregation {
		t.Errorf("actor state %#x %v", st, ok)
	}

	frame := func(tag bool, payload string) []byte {
		f := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0, 0x12, 0x34, 0x61}
		if tag {
			f = append(f, 0x81, 0x00, 0, 100)
		}
		return append(append(f, 0x08, 0x00), payload...)
	}
	// readData skips the switch's periodic LACPDUs.
	readData := func(c net.Conn) ([]byte, error) {
		for {
			f, err := readStreamFrame(c, buf)
			if err != nil || len(f) < 14 || binary.BigEndian.Uint16(f[12:]) != etherTypeSlow {
				return f, err
			}
		}
	}
	vm[1].Write(streamFrame(frame(false, "untagged: dropped")))
	vm[1].Write(streamFrame(frame(true, "to the tap")))
	n, err := peer.Read(buf)
	if err != nil || !bytes.Equal(buf[:n], frame(false, "to the tap")) {
		t.Fatalf("tap got % x, %v", buf[:n], err)
	}
	peer.Write(frame(false, "to the VM"))
	if f, err := readData(vm[1]); err != nil || !bytes.Equal(f, frame(true, "to the VM")) {
		t.Errorf("port 1 got % x, %v; want the frame tagged", f, err)
	}
	sw.SetPort(1, false)
	peer.Write(frame(false, "after the cut"))
	if f, err := readData(vm[0]); err != nil || !bytes.Equal(f, frame(true, "after the cut")) {
		t.Errorf("port 0 got % x, %v; want the frame once port 1 is cut", f, err)
	}
	if sw.Dropped.Load() != 1 {
		t.Errorf("dropped %d, want the untagged frame", sw.Dropped.Load())
	}
}
