package bmc

import (
	"strings"
	"testing"
	"unsafe"
)

// The ioctl numbers of include/uapi/linux/ipmi.h on 64-bit Linux.
func TestIoctlNumbers(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("SKIPPED: the expected numbers are those of 64-bit architectures")
	}
	if ipmictlSendCommand != 0x8028690d || ipmictlReceiveMsgTrun != 0xc030690b {
		t.Errorf("IPMICTL_SEND_COMMAND %#x (want 0x8028690d), IPMICTL_RECEIVE_MSG_TRUNC %#x (want 0xc030690b)",
			ipmictlSendCommand, ipmictlReceiveMsgTrun)
	}
}

func TestOpenDeviceNamesThePath(t *testing.T) {
	_, err := OpenDevice("/nonexistent/ipmi0")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/ipmi0") {
		t.Errorf("want an error naming the device, got %v", err)
	}
}
