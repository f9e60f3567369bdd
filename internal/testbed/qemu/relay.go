package qemu

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

// helpers are the programs, other than the relay, that a binary which
// starts VMs becomes when started with their first argument (see
// RegisterHelper).
var (
	helpersMu sync.Mutex
	helpers   = map[string]func(args []string) int{}
)

// RegisterHelper makes MaybeRelay run fn with the remaining arguments and
// exit with its result when the binary's first argument is arg. A package
// whose simulator starts the running binary again (bmcsim's BMC control
// program, started by ipmi_sim) registers itself from init.
func RegisterHelper(arg string, fn func(args []string) int) {
	helpersMu.Lock()
	defer helpersMu.Unlock()
	helpers[arg] = fn
}

// MaybeRelay turns the process into the relay when started by QEMU as
// RelayCommand made it, or into a registered helper (RegisterHelper, for
// example the BMC's control program when started by ipmi_sim), and never
// returns then. Call it first thing in TestMain or main of every binary
// that starts VMs.
func MaybeRelay() {
	if len(os.Args) >= 2 {
		helpersMu.Lock()
		fn := helpers[os.Args[1]]
		helpersMu.Unlock()
		if fn != nil {
			os.Exit(fn(os.Args[2:]))
		}
	}
	if len(os.Args) != 3 || os.Args[1] != RelayArg {
		return
	}
	if err := Relay(os.Args[2], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "qemu relay: %v\n", err)
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
