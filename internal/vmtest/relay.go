package vmtest

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
)

// RelayArg is the first argument that makes a binary act as the guestfwd
// relay (see MaybeRelay).
const RelayArg = "-vmtest-relay"

// RelayCommand is the slirp guestfwd "cmd:" program for target: the running
// binary itself (a test binary or a tool), started by QEMU once per guest
// connection with the connection on stdin/stdout. A guestfwd "tcp:" target
// would carry only one connection for the whole life of the VM.
func RelayCommand(target string) string {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	return self + " " + RelayArg + " " + target
}

// MaybeRelay turns the process into the relay when started by QEMU as
// RelayCommand made it, or into the BMC's control program when started by
// ipmi_sim (see IPMISim), and never returns then. Call it first thing in
// TestMain or main of every binary that starts VMs.
func MaybeRelay() {
	if len(os.Args) >= 3 && os.Args[1] == BMCControlArg {
		os.Exit(bmcControl(os.Args[2], os.Args[3:]))
	}
	if len(os.Args) != 3 || os.Args[1] != RelayArg {
		return
	}
	if err := Relay(os.Args[2], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "vmtest relay: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Relay copies between the guest connection (in, out) and a TCP connection
// to target until both directions are done.
func Relay(target string, in io.Reader, out io.Writer) error {
	c, err := net.Dial("tcp", target)
	if err != nil {
		return err
	}
	defer c.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(c, in)
		// The guest finished sending: pass the half-close on.
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	_, err = io.Copy(out, c)
	// QEMU closes our stdin when the guest closes; do not wait for it if
	// the host side is done.
	return err
}
