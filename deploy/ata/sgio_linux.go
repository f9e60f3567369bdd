package ata

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SGIO is the Passer of Linux: the SG_IO ioctl on the block device node
// (sd, or any SCSI device that takes SG_IO), which libata or the HBA's SAT
// layer turns into the ATA command.
type SGIO struct{}

// sgIOHdr is struct sg_io_hdr of <scsi/sg.h>; Go lays it out as C does on
// both 64-bit and 32-bit Linux.
type sgIOHdr struct {
	interfaceID    int32
	dxferDirection int32
	cmdLen         uint8
	mxSbLen        uint8
	iovecCount     uint16
	dxferLen       uint32
	dxferp         unsafe.Pointer
	cmdp           unsafe.Pointer
	sbp            unsafe.Pointer
	timeout        uint32 // milliseconds
	flags          uint32
	packID         int32
	usrPtr         unsafe.Pointer
	status         uint8
	maskedStatus   uint8
	msgStatus      uint8
	sbLenWr        uint8
	hostStatus     uint16
	driverStatus   uint16
	resid          int32
	duration       uint32
	info           uint32
}

const (
	sgIO          = 0x2285 // SG_IO
	sgDxferNone   = -1
	sgDxferToDev  = -2
	sgDxferFromDv = -3
	senseLen      = 64
)

// Pass opens path and issues r. Commands that change the drive's state
// open it read-write, as hdparm does; the rest read-only, so IDENTIFY
// works on a device the guard would not let be written. O_NONBLOCK keeps
// the open from waiting for removable media.
func (SGIO) Pass(ctx context.Context, path string, r *Request) (Reply, error) {
	if err := ctx.Err(); err != nil {
		return Reply{}, err
	}
	flags := os.O_RDONLY
	if r.Dir == DirOut || r.CDB[14] == OpSecurityErasePrepare {
		flags = os.O_RDWR
	}
	f, err := os.OpenFile(path, flags|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return Reply{}, err
	}
	defer f.Close()
	cdb := new([16]byte)
	*cdb = r.CDB
	sense := make([]byte, senseLen)
	// The kernel reads the header's pointers during the ioctl: pin what
	// they point to.
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(cdb)
	pin.Pin(&sense[0])
	h := sgIOHdr{
		interfaceID:    'S',
		dxferDirection: sgDxferNone,
		cmdLen:         uint8(len(cdb)),
		mxSbLen:        senseLen,
		cmdp:           unsafe.Pointer(&cdb[0]),
		sbp:            unsafe.Pointer(&sense[0]),
		timeout:        timeoutMillis(r.Timeout),
	}
	if len(r.Data) > 0 {
		h.dxferLen = uint32(len(r.Data))
		pin.Pin(&r.Data[0])
		h.dxferp = unsafe.Pointer(&r.Data[0])
		switch r.Dir {
		case DirIn:
			h.dxferDirection = sgDxferFromDv
		case DirOut:
			h.dxferDirection = sgDxferToDev
		}
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), sgIO, uintptr(unsafe.Pointer(&h)))
	if errno != 0 {
		return Reply{}, fmt.Errorf("SG_IO: %w", errno)
	}
	return Reply{
		Status:       h.status,
		HostStatus:   h.hostStatus,
		DriverStatus: h.driverStatus,
		Sense:        sense[:min(int(h.sbLenWr), senseLen)],
	}, nil
}

// timeoutMillis converts d to SG_IO's unsigned milliseconds, at most
// about 49 days.
func timeoutMillis(d time.Duration) uint32 {
	ms := d.Milliseconds()
	if ms <= 0 {
		return uint32(commandTimeout.Milliseconds())
	}
	return uint32(min(ms, math.MaxUint32))
}
