package bmc

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/ironic-go/ironic-agent/internal/ioctl"
	"golang.org/x/sys/unix"
)

// The kernel's IPMI character-device interface (include/uapi/linux/ipmi.h).
// The Go structs have the C layout: Go pads fields the way C does.
type ipmiMsg struct {
	netfn   uint8
	cmd     uint8
	dataLen uint16
	data    *byte
}

type ipmiReq struct {
	addr    *byte
	addrLen uint32
	msgid   int64
	msg     ipmiMsg
}

type ipmiRecv struct {
	recvType int32
	addr     *byte
	addrLen  uint32
	msgid    int64
	msg      ipmiMsg
}

// ipmiSystemInterfaceAddr addresses the BMC itself.
type ipmiSystemInterfaceAddr struct {
	addrType int32
	channel  int16
	lun      uint8
}

const (
	ipmiSystemInterfaceAddrType = 0x0c
	ipmiBMCChannel              = 0x0f
	ipmiResponseRecvType        = 1
	ipmiMaxMsgLength            = 272 // IPMI_MAX_MSG_LENGTH
	ipmiMaxAddrSize             = 32  // IPMI_MAX_ADDR_SIZE

	// DefaultTimeout bounds one request when the context has no earlier
	// deadline; ipmitool's open interface waits about as long.
	DefaultTimeout = 5 * time.Second
)

// ioctl numbers: _IOR('i', 13, struct ipmi_req) and
// _IOWR('i', 11, struct ipmi_recv), computed from the struct sizes and
// the architecture's encoding (internal/ioctl: powerpc's directions
// differ), so they are right on every architecture.
func ipmictlSendCommand() uintptr {
	return uintptr(ioctl.IOR('i', 13, unsafe.Sizeof(ipmiReq{})))
}

func ipmictlReceiveMsgTrun() uintptr {
	return uintptr(ioctl.IOWR('i', 11, unsafe.Sizeof(ipmiRecv{})))
}

// Device is an open IPMI character device (/dev/ipmi0).
type Device struct {
	path string
	mu   sync.Mutex // one request at a time: replies are matched by msgid
	fd   int
	next int64
}

// OpenDevice opens an IPMI device node. The kernel modules ipmi_devintf and
// ipmi_si (or ssif) must be loaded.
func OpenDevice(path string) (*Device, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return &Device{path: path, fd: fd}, nil
}

// Close closes the device.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// Send sends req to the BMC and waits for its response, until ctx ends or
// DefaultTimeout passes. A late response to an earlier, abandoned request
// is skipped by its message ID.
func (d *Device) Send(ctx context.Context, req Request) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return nil, errors.New("device closed")
	}
	if len(req.Data) > ipmiMaxMsgLength {
		return nil, fmt.Errorf("%d bytes of request data, the driver takes %d", len(req.Data), ipmiMaxMsgLength)
	}
	deadline := time.Now().Add(DefaultTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	d.next++
	msgid := d.next

	addr := ipmiSystemInterfaceAddr{addrType: ipmiSystemInterfaceAddrType, channel: ipmiBMCChannel}
	data := append([]byte(nil), req.Data...)
	r := ipmiReq{
		addr:    (*byte)(unsafe.Pointer(&addr)),
		addrLen: uint32(unsafe.Sizeof(addr)),
		msgid:   msgid,
		msg:     ipmiMsg{netfn: req.NetFn, cmd: req.Cmd, dataLen: uint16(len(data))},
	}
	if len(data) > 0 {
		r.msg.data = &data[0]
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), ipmictlSendCommand(), uintptr(unsafe.Pointer(&r)))
	runtime.KeepAlive(&addr)
	runtime.KeepAlive(data)
	if errno != 0 {
		return nil, fmt.Errorf("%s: IPMICTL_SEND_COMMAND: %w", d.path, errno)
	}

	buf := make([]byte, ipmiMaxMsgLength)
	for {
		if err := d.wait(ctx, deadline); err != nil {
			return nil, fmt.Errorf("%s: waiting for the response to %v: %w", d.path, req, err)
		}
		// Room for any address type (IPMI_MAX_ADDR_SIZE): the driver
		// refuses a message whose address does not fit.
		var raddr [ipmiMaxAddrSize]byte
		rv := ipmiRecv{
			addr:    &raddr[0],
			addrLen: uint32(len(raddr)),
			msg:     ipmiMsg{data: &buf[0], dataLen: uint16(len(buf))},
		}
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), ipmictlReceiveMsgTrun(), uintptr(unsafe.Pointer(&rv)))
		runtime.KeepAlive(&raddr)
		runtime.KeepAlive(buf)
		switch {
		case errno == unix.EAGAIN:
			continue
		case errno != 0 && errno != unix.EMSGSIZE: // EMSGSIZE: truncated, still delivered
			return nil, fmt.Errorf("%s: IPMICTL_RECEIVE_MSG_TRUNC: %w", d.path, errno)
		}
		if rv.msgid != msgid || rv.recvType != ipmiResponseRecvType {
			continue // a late reply to an abandoned request, or an event
		}
		n := min(int(rv.msg.dataLen), len(buf))
		return append([]byte(nil), buf[:n]...), nil
	}
}

// wait polls the device until a message is ready, ctx ends or the
// deadline passes. It polls in short slices so a cancelled ctx is noticed.
func (d *Device) wait(ctx context.Context, deadline time.Time) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return errors.New("timed out")
		}
		ms := int(min(left, 100*time.Millisecond) / time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(d.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, max(ms, 1))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		if n > 0 {
			return nil
		}
	}
}
