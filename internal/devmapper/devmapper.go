// Package devmapper creates, reloads and removes device-mapper devices
// through the DM ioctls on /dev/mapper/control (DM_DEV_CREATE,
// DM_TABLE_LOAD, DM_DEV_SUSPEND, DM_DEV_REMOVE), so neither dmsetup nor
// libdevmapper is needed in the ramdisk. The devices appear as /dev/dm-N
// through devtmpfs; with no udev, Create links /dev/mapper/NAME to that
// node itself, as libdevmapper does when udev is not running. The agent makes
// its multipath maps with it (deploy/multipath); the failing-disk test
// bed (internal/testbed/dmtest) its error, flakey and delay disks.
package devmapper

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/ioctl"
)

// The DM ioctl interface of <linux/dm-ioctl.h>: version 4 of the
// protocol, struct dm_ioctl of 312 bytes, struct dm_target_spec of 40.
const (
	ioctlSize      = 312
	targetSpecSize = 40
	nameLen        = 128
	uuidLen        = 129
	typeNameLen    = 16

	cmdVersion     = 0
	cmdDevCreate   = 3
	cmdDevRemove   = 4
	cmdSuspend     = 6
	cmdTableLoad   = 9
	cmdTableStatus = 12
	cmdTargetMsg   = 14

	// flagSuspend asks DM_DEV_SUSPEND to suspend; without it the call
	// resumes, making a loaded (inactive) table the live one.
	flagSuspend = 1 << 1
	// flagNoFlush suspends without waiting for queued I/O to be flushed
	// (the "vanishes" case: I/O in flight meets the new table).
	flagNoFlush = 1 << 11
	// flagStatusTable asks DM_TABLE_STATUS for the table lines instead
	// of the targets' status.
	flagStatusTable = 1 << 4
	// flagBufferFull: the kernel's answer did not fit the buffer given.
	flagBufferFull = 1 << 8
)

// ioctlNumber is _IOWR(0xfd, nr, struct dm_ioctl) in the architecture's
// encoding (internal/ioctl).
func ioctlNumber(nr uint32) uint32 {
	return ioctl.IOWR(0xfd, byte(nr), ioctlSize)
}

// Target is one line of a table, in 512-byte sectors, as dmsetup takes it:
// "START LENGTH TYPE PARAMS".
type Target struct {
	Start, Length uint64
	Type          string // linear, multipath, error, flakey, delay, zero
	Params        string
}

func (t Target) String() string {
	return fmt.Sprintf("%d %d %s %s", t.Start, t.Length, t.Type, t.Params)
}

// Linear maps length sectors at start onto dev from sector offset.
func Linear(start, length uint64, dev string, offset uint64) Target {
	return Target{Start: start, Length: length, Type: "linear", Params: fmt.Sprintf("%s %d", dev, offset)}
}

// header builds a struct dm_ioctl for the device name with flags and
// room for size bytes in all (header and data).
func header(name string, flags uint32, size int) ([]byte, error) {
	if len(name) >= nameLen || strings.ContainsRune(name, 0) {
		return nil, fmt.Errorf("devmapper: device name %q: want fewer than %d bytes and no NUL", name, nameLen)
	}
	b := make([]byte, size)
	le := binary.LittleEndian
	le.PutUint32(b[0:], 4) // version 4.0.0: the kernel checks the major
	le.PutUint32(b[12:], uint32(size))
	le.PutUint32(b[16:], ioctlSize) // data_start
	le.PutUint32(b[28:], flags)
	copy(b[48:48+nameLen], name)
	return b, nil
}

// createHeader is DM_DEV_CREATE's struct dm_ioctl: the name and the
// device's UUID (which multipath-tools, kpartx and the inventory read back
// from /sys/block/dm-N/dm/uuid), both NUL-terminated.
func createHeader(name, uuid string) ([]byte, error) {
	if len(uuid) >= uuidLen || strings.ContainsRune(uuid, 0) {
		return nil, fmt.Errorf("devmapper: device %s: UUID %q: want fewer than %d bytes and no NUL", name, uuid, uuidLen)
	}
	b, err := header(name, 0, ioctlSize)
	if err != nil {
		return nil, err
	}
	copy(b[48+nameLen:48+nameLen+uuidLen], uuid)
	return b, nil
}

// tableLoad builds DM_TABLE_LOAD's buffer: the header, then each target
// spec followed by its NUL-terminated parameters, padded to 8 bytes ("next"
// is the offset of the following spec from this one's start).
func tableLoad(name string, table []Target) ([]byte, error) {
	if len(table) == 0 {
		return nil, errors.New("devmapper: empty table")
	}
	var data bytes.Buffer
	for _, t := range table {
		if t.Type == "" || len(t.Type) >= typeNameLen {
			return nil, fmt.Errorf("devmapper: target type %q", t.Type)
		}
		spec := make([]byte, targetSpecSize)
		binary.LittleEndian.PutUint64(spec[0:], t.Start)
		binary.LittleEndian.PutUint64(spec[8:], t.Length)
		copy(spec[24:], t.Type)
		params := append([]byte(t.Params), 0)
		for (targetSpecSize+len(params))%8 != 0 {
			params = append(params, 0)
		}
		binary.LittleEndian.PutUint32(spec[20:], uint32(targetSpecSize+len(params)))
		data.Write(spec)
		data.Write(params)
	}
	b, err := header(name, 0, ioctlSize+data.Len())
	if err != nil {
		return nil, err
	}
	binary.LittleEndian.PutUint32(b[20:], uint32(len(table))) // target_count
	copy(b[ioctlSize:], data.Bytes())
	return b, nil
}

// decodeDev turns the kernel's huge_encode_dev value into major, minor.
func decodeDev(dev uint64) (major, minor uint32) {
	return uint32((dev & 0xfff00) >> 8), uint32((dev & 0xff) | ((dev >> 12) & 0xfff00))
}

// messageBuffer builds DM_TARGET_MSG's buffer: the header, then struct
// dm_target_msg (the sector that picks the target, here always 0: a
// multipath map has one) and the NUL-terminated message, such as
// "fail_path 8:16".
func messageBuffer(name, msg string) ([]byte, error) {
	if msg == "" || strings.ContainsRune(msg, 0) {
		return nil, fmt.Errorf("devmapper: device %s: message %q: want text without NUL", name, msg)
	}
	size := ioctlSize + 8 + len(msg) + 1
	size += (8 - size%8) % 8
	b, err := header(name, 0, size)
	if err != nil {
		return nil, err
	}
	copy(b[ioctlSize+8:], msg)
	return b, nil
}

// parseTargets decodes DM_TABLE_STATUS's answer in b (the whole buffer
// the kernel filled): target_count specs from data_start, each followed
// by its NUL-terminated status or table text; each spec's "next" is the
// offset of the following one from data_start. Every offset is checked
// against the sizes the kernel wrote, so a short or odd buffer is an
// error, never a read past it.
func parseTargets(b []byte) ([]Target, error) {
	if len(b) < ioctlSize {
		return nil, fmt.Errorf("devmapper: status answer of %d bytes, shorter than its header", len(b))
	}
	le := binary.LittleEndian
	dataSize, dataStart, count := le.Uint32(b[12:]), le.Uint32(b[16:]), le.Uint32(b[20:])
	if int64(dataSize) > int64(len(b)) || dataStart < ioctlSize || dataStart > dataSize {
		return nil, fmt.Errorf("devmapper: status answer: data_start %d, data_size %d in a buffer of %d", dataStart, dataSize, len(b))
	}
	data := b[dataStart:dataSize]
	var out []Target
	off := 0
	for i := uint32(0); i < count; i++ {
		if off+targetSpecSize > len(data) {
			return nil, fmt.Errorf("devmapper: status answer: target %d of %d at %d past the data's %d bytes", i, count, off, len(data))
		}
		spec := data[off:]
		text, _, ok := bytes.Cut(spec[targetSpecSize:], []byte{0})
		if !ok {
			return nil, fmt.Errorf("devmapper: status answer: target %d's text has no end", i)
		}
		typ, _, _ := bytes.Cut(spec[24:24+typeNameLen], []byte{0})
		out = append(out, Target{Start: le.Uint64(spec[0:]), Length: le.Uint64(spec[8:]), Type: string(typ), Params: string(text)})
		next := int(le.Uint32(spec[20:]))
		if i+1 < count && next <= off {
			return nil, fmt.Errorf("devmapper: status answer: target %d's next offset %d does not move past %d", i, next, off)
		}
		off = next
	}
	return out, nil
}
