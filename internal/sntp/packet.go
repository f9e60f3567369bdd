// Package sntp measures the local clock's offset from an NTP server with
// the client side of SNTP (RFC 4330, the client mode of RFC 5905): a few
// 48-byte requests over UDP, the reply with the shortest round trip wins.
// It only measures; setting the clock is the caller's job, so the package
// can be tested without touching the host's clock.
package sntp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// packetLen is the NTP header without extension fields or MAC.
const packetLen = 48

const (
	modeClient = 3
	modeServer = 4

	leapUnsynchronised = 3
	version            = 4
	// maxStratum: 16 means unsynchronised in RFC 5905.
	maxStratum = 15
)

// packet is an NTP header, fields as on the wire.
type packet struct {
	Leap      uint8 // 2 bits
	Version   uint8 // 3 bits
	Mode      uint8 // 3 bits
	Stratum   uint8
	Poll      int8
	Precision int8
	RootDelay uint32 // 16.16 seconds
	RootDisp  uint32 // 16.16 seconds
	RefID     [4]byte
	Reference uint64 // 32.32 NTP timestamps
	Originate uint64
	Receive   uint64
	Transmit  uint64
}

// parsePacket decodes the header of an NTP packet; extension fields and a
// MAC after it are ignored.
func parsePacket(b []byte) (packet, error) {
	if len(b) < packetLen {
		return packet{}, fmt.Errorf("NTP packet of %d bytes, want at least %d", len(b), packetLen)
	}
	p := packet{
		Leap:      b[0] >> 6,
		Version:   (b[0] >> 3) & 7,
		Mode:      b[0] & 7,
		Stratum:   b[1],
		Poll:      int8(b[2]),
		Precision: int8(b[3]),
		RootDelay: binary.BigEndian.Uint32(b[4:]),
		RootDisp:  binary.BigEndian.Uint32(b[8:]),
		Reference: binary.BigEndian.Uint64(b[16:]),
		Originate: binary.BigEndian.Uint64(b[24:]),
		Receive:   binary.BigEndian.Uint64(b[32:]),
		Transmit:  binary.BigEndian.Uint64(b[40:]),
	}
	copy(p.RefID[:], b[12:16])
	return p, nil
}

// marshal encodes the header.
func (p packet) marshal() []byte {
	b := make([]byte, packetLen)
	b[0] = p.Leap<<6 | (p.Version&7)<<3 | p.Mode&7
	b[1] = p.Stratum
	b[2] = byte(p.Poll)
	b[3] = byte(p.Precision)
	binary.BigEndian.PutUint32(b[4:], p.RootDelay)
	binary.BigEndian.PutUint32(b[8:], p.RootDisp)
	copy(b[12:16], p.RefID[:])
	binary.BigEndian.PutUint64(b[16:], p.Reference)
	binary.BigEndian.PutUint64(b[24:], p.Originate)
	binary.BigEndian.PutUint64(b[32:], p.Receive)
	binary.BigEndian.PutUint64(b[40:], p.Transmit)
	return b
}

// KissError is a kiss-o'-death reply (stratum 0): the server tells the
// client to stop (DENY, RSTR) or to slow down (RATE). RFC 4330 section 8
// forbids using its timestamps.
type KissError struct{ Code string }

func (e *KissError) Error() string {
	return fmt.Sprintf("kiss-o'-death %q from the server", e.Code)
}

// errNotOurs marks a reply that is not the answer to our request (wrong
// mode, or an originate timestamp that does not echo ours): a stale reply
// to an earlier request or a forgery, to be dropped while waiting on.
var errNotOurs = errors.New("not a reply to our request")

// validate applies RFC 4330 section 5's checks to a reply to the request
// whose transmit timestamp was sent.
func (p packet) validate(sent uint64) error {
	if p.Mode != modeServer || p.Originate != sent {
		return errNotOurs
	}
	if p.Stratum == 0 {
		return &KissError{Code: kissCode(p.RefID)}
	}
	if p.Leap == leapUnsynchronised {
		return errors.New("server is unsynchronised (leap indicator 3)")
	}
	if p.Stratum > maxStratum {
		return fmt.Errorf("server is unsynchronised (stratum %d)", p.Stratum)
	}
	if p.Transmit == 0 {
		return errors.New("reply has no transmit timestamp")
	}
	if p.Receive == 0 {
		return errors.New("reply has no receive timestamp")
	}
	return nil
}

// kissCode is the four ASCII letters of a kiss code, anything else hex.
func kissCode(id [4]byte) string {
	for _, c := range id {
		if c < 'A' || c > 'Z' {
			return fmt.Sprintf("%x", id[:])
		}
	}
	return string(id[:])
}

// eraStart are the instants NTP era 0 (1900) and era 1 (2036) begin.
var (
	era0 = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	era1 = era0.Add(1 << 32 * time.Second)
)

// ntpTime turns a 32.32 timestamp into a time: RFC 4330 section 3 reads a
// clear most significant bit as era 1 (2036-2104), so the client works for
// dates between 1968 and 2104.
func ntpTime(ts uint64) time.Time {
	secs := ts >> 32
	nanos := (ts & 0xffffffff) * 1e9 >> 32
	base := era0
	if secs&0x80000000 == 0 {
		base = era1
	}
	return base.Add(time.Duration(secs)*time.Second + time.Duration(nanos))
}

// ntpTimestamp is ntpTime's inverse for times between 1968 and 2104.
func ntpTimestamp(t time.Time) uint64 {
	base := era0
	if !t.Before(era1) {
		base = era1
	}
	d := t.Sub(base)
	secs := uint64(d / time.Second)
	frac := (uint64(d%time.Second) << 32) / 1e9
	return secs<<32 | frac
}
