// Package bmc finds the baseboard management controller's LAN addresses
// over IPMI, as Ironic Python Agent does with ipmitool: bmc_address,
// bmc_v6address and bmc_mac of the inventory. It talks to the kernel's IPMI
// driver (/dev/ipmi0) with ioctls and runs no external program.
//
// The operating-system edge is the Transport interface: Device sends real
// requests, Replay answers from a recorded ipmi.json (fixtures and tests),
// and Recorder wraps another Transport and keeps what it saw, for
// capture-fixture.
package bmc

import (
	"context"
	"fmt"
)

// Network functions and commands used here (IPMI 2.0, tables G-1 and 5-1).
const (
	NetFnApp       = 0x06
	NetFnTransport = 0x0c

	CmdGetDeviceID     = 0x01 // NetFnApp
	CmdGetChannelInfo  = 0x42 // NetFnApp
	CmdGetLANConfParam = 0x02 // NetFnTransport
)

// Request is one IPMI request to the BMC.
type Request struct {
	NetFn uint8
	Cmd   uint8
	Data  []byte
}

func (r Request) String() string {
	return fmt.Sprintf("netfn 0x%02x cmd 0x%02x data %x", r.NetFn, r.Cmd, r.Data)
}

// Transport sends one request and returns the BMC's response: the
// completion code, then the response data. An error means no response
// (timeout, driver error), not a non-zero completion code.
type Transport interface {
	Send(ctx context.Context, req Request) ([]byte, error)
}

// CompletionError is a response whose completion code is not 0.
type CompletionError struct {
	Req  Request
	Code uint8
}

func (e *CompletionError) Error() string {
	return fmt.Sprintf("ipmi %v: completion code 0x%02x (%s)", e.Req, e.Code, completionText(e.Code))
}

// completionText names the generic completion codes (IPMI 2.0 table 5-2)
// and the LAN parameter ones (table 23-3).
func completionText(c uint8) string {
	switch c {
	case 0x80:
		return "parameter not supported"
	case 0xc0:
		return "node busy"
	case 0xc1:
		return "invalid command"
	case 0xc3:
		return "timeout"
	case 0xc7:
		return "request data length invalid"
	case 0xc9:
		return "parameter out of range"
	case 0xcb:
		return "requested data not present"
	case 0xcc:
		return "invalid data field in request"
	case 0xd4:
		return "insufficient privilege"
	case 0xd5:
		return "not supported in present state"
	case 0xff:
		return "unspecified error"
	}
	return "unknown"
}

// call sends req and returns the response data after a zero completion
// code.
func call(ctx context.Context, t Transport, req Request) ([]byte, error) {
	resp, err := t.Send(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("ipmi %v: %w", req, err)
	}
	if len(resp) == 0 {
		return nil, fmt.Errorf("ipmi %v: empty response", req)
	}
	if resp[0] != 0 {
		return nil, &CompletionError{Req: req, Code: resp[0]}
	}
	return resp[1:], nil
}

// DeviceNodes are the IPMI device nodes ipmitool opens for interface 0, in
// its order, relative to the root directory. IPA only checks that one of
// /dev/ipmi*, /dev/ipmi/* or /dev/ipmidev/* is a character device; looking
// at these three names instead of listing /dev keeps a captured fixture
// free of /dev's other entries.
func DeviceNodes() []string { return []string{"dev/ipmi0", "dev/ipmi/0", "dev/ipmidev/0"} }
