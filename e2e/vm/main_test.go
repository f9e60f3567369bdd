// Package vm runs the agent ramdisk in QEMU virtual machines (software
// emulation) against Debian's Ironic and ironic-inspector on the host:
// inspection and discovery with the data checked against what QEMU was
// told, cleaning, and a deploy whose bytes are read back from the VM's disk
// file. Ironic and inspector listen on 127.0.0.1; the guest reaches them
// through slirp guestfwd relays, Ironic reaches the agent through a slirp
// hostfwd, and an lldpd in a network namespace talks LLDP to the guest.
package vm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	ramdiskpkg "github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// Ports of this package (the vm range of the team's allocation), moved by
// $E2E_PORT_OFFSET so that two checkouts can run this package at once.
var (
	ironicPort    = portOffset() + 9510
	inspectorPort = portOffset() + 9511
	agentPortBase = portOffset() + 9520 // the first of the agent API ports newAgentPort hands out
	imagePort     = portOffset() + 9530
	bmcLANPort    = portOffset() + 9540 // UDP, the ipmi_sim LAN channel of TestVMIPMIBIOS (+2: TestVMIPMIUEFI)
	bmcVMPort     = portOffset() + 9541 // TCP on 127.0.0.1, ipmi_sim's end of QEMU's ipmi-bmc-extern (+2: UEFI)
)

// slowRun says whether $E2E_VM_SLOW is 1: run everything, however long.
func slowRun() bool { return os.Getenv("E2E_VM_SLOW") == "1" }

// slowScenario skips t unless $E2E_VM_SLOW is 1. It marks the second
// firmware of a scenario whose first one runs by default (PXE, the deployed
// OS, rescue, RAID deploy) and the power cuts, whose Ironic timeouts alone
// take minutes: together they would push ./test.sh past its 45 minutes
// (docs/testing.md: Environment switches).
func slowScenario(t *testing.T) {
	t.Helper()
	if !slowRun() {
		t.Skip("SKIPPED: slow scenario; E2E_VM_SLOW=1 runs it (docs/testing.md: Environment switches)")
	}
}

// seriesIndependent skips t when $IRONIC_SERIES names a series other than
// the default (./test.sh's second round, IRONIC_SERIES_EXTRA), unless
// $E2E_VM_SLOW is 1. It marks the scenarios that would test nothing new
// there: those that start no Ironic, those whose Ironic is one of their own
// on the host's series whatever $IRONIC_SERIES says, and those whose
// subject is the agent's side of steps every series drives alike (disks,
// RAID, multipath, erase, networks). The second round keeps the rest: the
// lifecycle, built-in inspection and discovery, fast track, Metal3,
// service steps, the config drive, UEFI boot loader installation
// (docs/testing.md: Ironic series).
func seriesIndependent(t *testing.T) {
	t.Helper()
	series, err := ironic.SeriesFromEnv()
	if err != nil || slowRun() {
		return // a bad $IRONIC_SERIES fails in services
	}
	if def, _ := ironic.ParseSeries(""); series != def {
		t.Skipf("SKIPPED: series-independent scenario: runs in the default series' round (%s) only; E2E_VM_SLOW=1 runs it with %s=%s too (docs/testing.md: Ironic series)",
			def, ironic.SeriesEnv, string(series))
	}
}

// portOffset is $E2E_PORT_OFFSET, 0 when unset or not a number below 50000.
func portOffset() int {
	n, err := strconv.Atoi(os.Getenv("E2E_PORT_OFFSET"))
	if err != nil || n < 0 || n >= 50000 {
		return 0
	}
	return n
}

// suite holds what the tests share, made on first use: the ramdisk (every
// test) and the services (root-only tests).
type suite struct {
	dir string

	rdOnce sync.Once
	rd     *qemu.Ramdisk
	rdErr  error

	svcOnce   sync.Once
	services  *ironic.Services
	ironic    *ironic.Client
	inspector *ironic.InspectorClient
	// series is the Ironic release the services run ($IRONIC_SERIES).
	series ironic.Series
	svcErr error

	// pxe is the provisioning network of the network-boot tests, with
	// its own Ironic (provisioningNetwork).
	pxeOnce sync.Once
	pxe     *pxeBed
	pxeErr  error
}

// theSuite is set by TestMain before any test runs and torn down after.
var theSuite *suite

func TestMain(m *testing.M) {
	// QEMU runs this test binary as its guestfwd relay.
	qemu.MaybeRelay()
	// A private mount namespace (looptest.Main): what the tests mount,
	// the provisioning networks' named namespaces among it, goes with
	// the test binary however it ends.
	looptest.Main(func() int { return runMain(m) })
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ironic-agent-vm-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	theSuite = &suite{dir: dir}
	code := m.Run()
	if theSuite.services != nil {
		theSuite.services.Close()
	}
	if theSuite.pxe != nil {
		theSuite.pxe.Close()
	}
	if os.Getenv("E2E_KEEP") == "" {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "vm: kept %s\n", dir)
	}
	return code
}

func needQEMU(t *testing.T) {
	t.Helper()
	qemu.SkipUnlessRoot(t)
	for _, p := range []string{"/usr/bin/qemu-system-x86_64", qemu.OVMFCode} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("SKIPPED: needs qemu-system-x86 and ovmf (in test.sh; run it as root to install): %v", err)
		}
	}
}

// ramdisk builds the ramdisk once per test binary.
func ramdisk(t *testing.T) *qemu.Ramdisk {
	t.Helper()
	needQEMU(t)
	s := theSuite
	s.rdOnce.Do(func() {
		// VMTEST_RAMDISK names a directory with a ramdisk built before
		// (go run ./cmd/mkramdisk -out DIR), to iterate without rebuilding.
		if d := os.Getenv("VMTEST_RAMDISK"); d != "" {
			s.rd = &qemu.Ramdisk{Kernel: filepath.Join(d, ramdiskpkg.KernelName), Initrd: filepath.Join(d, ramdiskpkg.InitramfsName),
				Agent: filepath.Join(d, "ironic-agent")}
			t.Logf("using the ramdisk in %s (VMTEST_RAMDISK)", d)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		s.rd, s.rdErr = qemu.BuildRamdisk(ctx)
		if s.rdErr == nil {
			t.Logf("ramdisk built: %s", sizes(s.rd))
			reportSuiteSeconds(t, time.Since(start), "ramdisk_build_s")
		}
	})
	if s.rdErr != nil {
		t.Fatalf("build the ramdisk: %v", s.rdErr)
	}
	return s.rd
}

func sizes(rd *qemu.Ramdisk) string {
	sz := func(p string) float64 {
		st, err := os.Stat(p)
		if err != nil {
			return 0
		}
		return float64(st.Size()) / (1 << 20)
	}
	return fmt.Sprintf("kernel %.2f MiB, initramfs %.2f MiB, agent %.2f MiB", sz(rd.Kernel), sz(rd.Initrd), sz(rd.Agent))
}

// services starts Ironic and ironic-inspector once (root only: they are
// installed with apt when missing).
func services(t *testing.T) *suite {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: installs and runs Debian's Ironic and ironic-inspector, lldpd in a network namespace")
	}
	s := theSuite
	s.svcOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		if s.series, s.svcErr = ironic.SeriesFromEnv(); s.svcErr != nil {
			return
		}
		// The ipmi hardware type where ipmitool is installed: its power
		// interface runs it when the conductor loads it. The series' root
		// filesystems carry it (ironic-conductor depends on it).
		_, noIPMItool := exec.LookPath("ipmitool")
		var st *ironic.Stack
		st, s.svcErr = ironic.StartStack(ctx, ironic.Config{Dir: filepath.Join(s.dir, "services"), Series: s.series,
			IronicPort: ironicPort, InspectorPort: inspectorPort,
			InspectorCallbackURL: "http://" + guestHost + ":" + strconv.Itoa(inspectorPort),
			IPMI:                 noIPMItool == nil || !s.series.Host()})
		if s.svcErr == nil {
			s.services, s.ironic, s.inspector = st.Services, st.Ironic, st.Inspector
		}
	})
	if s.svcErr != nil {
		t.Fatalf("start Ironic and ironic-inspector: %v", s.svcErr)
	}
	ironic.LogOnFailure(t, s.services)
	return s
}

// lldpNeighbour puts a switch's lldpd, announcing peer, at the far end of
// m's second NIC: a tap in a network namespace of the test's own (named
// after prefix and this process; its files below m.Dir), whose MAC chassis
// is lldpd's chassis ID. It returns the options that hand QEMU that tap;
// the namespace goes when the test ends.
func lldpNeighbour(t *testing.T, ctx context.Context, m *qemu.Machine, prefix, chassis string, peer netbed.LLDPPeer) qemu.Options {
	t.Helper()
	ns, err := netbed.NewNetns(ctx, fmt.Sprintf("%s-%d", prefix, os.Getpid()), "vmlldp0", chassis, filepath.Join(m.Dir, "lldp"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	if err := ns.StartLLDPD(ctx, peer); err != nil {
		t.Fatal(err)
	}
	m.NICs[1].Backend = qemu.NICTap
	return qemu.Options{Tap: ns.File}
}
