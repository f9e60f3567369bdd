package vm

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// The machine side of a scenario: the VM, its directory, its console and
// the kernel parameters the agent gets.

// guestHost is the address on the slirp network that the guestfwd rules
// forward to host services; the guest has no other way out (restrict=on).
const guestHost = "10.0.2.100"

// boot starts m and stops it when the test ends, attaching the end of the
// serial console to a failure.
func boot(t *testing.T, ctx context.Context, m qemu.Machine, opts qemu.Options) *qemu.VM {
	t.Helper()
	vm, err := qemu.Start(ctx, m, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		vm.Kill()
		if t.Failed() {
			t.Logf("serial console of %s (end; all of it in %s; QEMU command line in %s):\n%s",
				m.Firmware, vm.LogPath, filepath.Join(m.Dir, "qemu.cmdline"), consoleTail(vm, 120))
		}
	})
	return vm
}

// consoleTail is the last n lines of the VM's console, with their times.
func consoleTail(vm *qemu.VM, n int) string {
	lines := vm.Lines()
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%8.3f %s\n", l.At.Seconds(), l.Text)
	}
	return b.String()
}

// uptimeAt returns the guest uptime the init logged on the first console
// line holding what (its "uptime=" field), for boot-time measurements.
func uptimeAt(vm *qemu.VM, what string) string {
	l, ok := vm.Find(what)
	if !ok {
		return "?"
	}
	for f := range strings.FieldsSeq(l.Text) {
		if v, ok := strings.CutPrefix(f, "uptime="); ok {
			return v + "s"
		}
	}
	return "?"
}

// serve runs an HTTP server on 127.0.0.1 (port 0: any free one) until the
// test ends and returns its address.
func serve(t *testing.T, port int, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// vmDir is where a test's VM keeps its disks and logs: below the suite's
// directory, which E2E_KEEP=1 keeps for a look after the run.
func vmDir(t *testing.T) string {
	return filepath.Join(theSuite.dir, strings.ReplaceAll(t.Name(), "/", "_"), "vm")
}

// agentArgs are the kernel parameters Ironic's boot would give the agent,
// pointed at the host services through the guestfwd rules. A deploy or
// cleaning boot gets the Ironic API and the hostfwd port Ironic calls the
// agent back on. An inspection boot gets only the inspector callback, as
// Ironic 21.4 boots managed inspection without fast track (and discovery
// boots are configured): like IPA, the agent then inspects and skips lookup
// and heartbeats. An inspection ramdisk that also looked the node up would be
// handed an agent token that outlives it, and the cleaning ramdisk that
// boots next would get only the masked token.
func agentArgs(agentPort int) string {
	return strings.Join([]string{
		"ipa-api-url=http://" + guestHost + ":" + strconv.Itoa(ironicPort),
		"ipa-advertise-host=127.0.0.1",
		"ipa-advertise-port=" + strconv.Itoa(agentPort),
		"ipa-lookup-timeout=900",
	}, " ")
}

func serviceMachine(t *testing.T, rd *qemu.Ramdisk, fw string, agentPort int, macs [2]string) qemu.Machine {
	m := qemu.AgentMachine(qemu.Firmware(fw), macs)
	m.Dir = vmDir(t)
	m.Kernel, m.Initrd = rd.KernelFor(m.Firmware), rd.InitrdFor(m.Firmware)
	m.GuestFwd = map[string]string{
		guestHost + ":" + strconv.Itoa(ironicPort):    "127.0.0.1:" + strconv.Itoa(ironicPort),
		guestHost + ":" + strconv.Itoa(inspectorPort): "127.0.0.1:" + strconv.Itoa(inspectorPort),
	}
	m.HostFwd = map[int]int{agentPort: 9999}
	return m
}
