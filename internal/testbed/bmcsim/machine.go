package bmcsim

import (
	"net"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// OpenIPMIMachine is a machine with no disks and NICs whose BMC is
// OpenIPMI's ipmi_sim on 127.77.0.9 (user admin, password s3cret), for
// the tests of the simulator itself.
func OpenIPMIMachine(t testing.TB, dir string) qemu.Machine {
	t.Helper()
	m := qemu.DefaultMachine(qemu.BIOS)
	m.Dir = dir
	m.Disks, m.NICs, m.MemoryMB, m.CPUs = nil, nil, 128, 1
	m.BMC = &qemu.BMC{Kind: qemu.BMCOpenIPMI, MfgID: 0x1234, ProductID: 0x0beb, LANAddress: "127.77.0.9", LANPort: FreePort(t, "udp", "127.77.0.9"),
		LANMAC: "02:00:00:77:00:09", User: "admin", Password: "s3cret", VMPort: FreePort(t, "tcp", "127.0.0.1")}
	return m
}

// FreePort is a port of network ("tcp" or "udp") on host that nobody
// listens on now.
func FreePort(t testing.TB, network, host string) int {
	t.Helper()
	var a net.Addr
	if network == "udp" {
		c, err := net.ListenPacket(network, host+":0")
		if err != nil {
			t.Fatal(err)
		}
		a = c.LocalAddr()
		c.Close()
	} else {
		l, err := net.Listen(network, host+":0")
		if err != nil {
			t.Fatal(err)
		}
		a = l.Addr()
		l.Close()
	}
	_, p, _ := net.SplitHostPort(a.String())
	n, _ := net.LookupPort(network, p)
	return n
}
