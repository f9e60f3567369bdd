package bmc

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/ironic-go/ironic-agent/internal/ioctl"
)

// The ioctl numbers of include/uapi/linux/ipmi.h on 64-bit Linux: the
// structs' sizes as the kernel's (internal/ioctl checks the encoding
// per architecture), and the numbers of this build's.
func TestIoctlNumbers(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("SKIPPED: the expected numbers are those of 64-bit architectures")
	}
	if unsafe.Sizeof(ipmiReq{}) != 40 || unsafe.Sizeof(ipmiRecv{}) != 48 {
		t.Errorf("struct ipmi_req %d bytes (want 40), struct ipmi_recv %d (want 48)", unsafe.Sizeof(ipmiReq{}), unsafe.Sizeof(ipmiRecv{}))
	}
	send, recv := uintptr(0x8028690d), uintptr(0xc030690b)
	if ioctl.Host().Read != 2<<0 || ioctl.Host().Write != 1 {
		send = 0x4028690d // powerpc, mips: read is 2, write 4, in three bits
	}
	if ipmictlSendCommand() != send || ipmictlReceiveMsgTrun() != recv {
		t.Errorf("IPMICTL_SEND_COMMAND %#x (want %#x), IPMICTL_RECEIVE_MSG_TRUNC %#x (want %#x)",
			ipmictlSendCommand(), send, ipmictlReceiveMsgTrun(), recv)
	}
}

func TestOpenDeviceNamesThePath(t *testing.T) {
	_, err := OpenDevice("/nonexistent/ipmi0")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/ipmi0") {
		t.Errorf("want an error naming the device, got %v", err)
	}
}
