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

	"github.com/ironic-go/ironic-agent/e2e/ironictest"
	ramdiskpkg "github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/vmtest"
)

// Ports of this package (the vm range of the team's allocation), moved by
// $E2E_PORT_OFFSET so that two checkouts can run this package at once.
var (
	ironicPort    = portOffset() + 9510
	inspectorPort = portOffset() + 9511
	agentPortBase = portOffset() + 9520 // hostfwd to the guest's agent API, one per VM
	imagePort     = portOffset() + 9530
	bmcLANPort    = portOffset() + 9540 // UDP, the ipmi_sim LAN channel of TestVMIPMIBIOS (+2: TestVMIPMIUEFI)
	bmcVMPort     = portOffset() + 9541 // TCP on 127.0.0.1, ipmi_sim's end of QEMU's ipmi-bmc-extern (+2: UEFI)
)

// slowScenario skips t unless $E2E_VM_SLOW is 1. It marks the second
// firmware of a scenario whose first one runs by default (PXE, the deployed
// OS, rescue, RAID deploy) and the power cuts, whose Ironic timeouts alone
// take minutes: together they would push ./test.sh past its 45 minutes
// (README: Slow VM scenarios).
func slowScenario(t *testing.T) {
	t.Helper()
	if os.Getenv("E2E_VM_SLOW") != "1" {
		t.Skip("SKIPPED: slow scenario; E2E_VM_SLOW=1 runs it (README: Slow VM scenarios)")
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
	rd     *vmtest.Ramdisk
	rdErr  error

	svcOnce   sync.Once
	services  *ironictest.Services
	ironic    *ironictest.Client
	inspector *ironictest.InspectorClient
	// series is the Ironic release the services run ($IRONIC_SERIES).
	series ironictest.Series
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
	vmtest.MaybeRelay()
	os.Exit(runMain(m))
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
	for _, p := range []string{"/usr/bin/qemu-system-x86_64", vmtest.OVMFCode} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("SKIPPED: needs qemu-system-x86 and ovmf (in test.sh; run it as root to install): %v", err)
		}
	}
}

// ramdisk builds the ramdisk once per test binary.
func ramdisk(t *testing.T) *vmtest.Ramdisk {
	t.Helper()
	needQEMU(t)
	s := theSuite
	s.rdOnce.Do(func() {
		// VMTEST_RAMDISK names a directory with a ramdisk built before
		// (go run ./cmd/mkramdisk -out DIR), to iterate without rebuilding.
		if d := os.Getenv("VMTEST_RAMDISK"); d != "" {
			s.rd = &vmtest.Ramdisk{Kernel: filepath.Join(d, ramdiskpkg.KernelName), Initrd: filepath.Join(d, ramdiskpkg.InitramfsName),
				Agent: filepath.Join(d, "ironic-agent")}
			t.Logf("using the ramdisk in %s (VMTEST_RAMDISK)", d)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		s.rd, s.rdErr = vmtest.BuildRamdisk(ctx)
		if s.rdErr == nil {
			t.Logf("ramdisk built in %s: %s", time.Since(start).Round(time.Millisecond), sizes(s.rd))
		}
	})
	if s.rdErr != nil {
		t.Fatalf("build the ramdisk: %v", s.rdErr)
	}
	return s.rd
}

func sizes(rd *vmtest.Ramdisk) string {
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
		if s.series, s.svcErr = ironictest.SeriesFromEnv(); s.svcErr != nil {
			return
		}
		var in *ironictest.Installed
		if in, s.svcErr = ironictest.Install(ctx, s.series); s.svcErr != nil {
			return
		}
		d := filepath.Join(s.dir, "services")
		if s.svcErr = os.MkdirAll(d, 0o755); s.svcErr != nil {
			return
		}
		// The ipmi hardware type where ipmitool is installed: its power
		// interface runs it when the conductor loads it. The series' root
		// filesystems carry it (ironic-conductor depends on it).
		_, noIPMItool := exec.LookPath("ipmitool")
		cfg := in.Config(ironictest.Config{Dir: d, IronicPort: ironicPort, InspectorPort: inspectorPort,
			InspectorCallbackURL: "http://" + guestHost + ":" + strconv.Itoa(inspectorPort)})
		cfg.IPMI = noIPMItool == nil || !cfg.Series.Host()
		s.services, s.svcErr = ironictest.Start(ctx, cfg)
		if s.svcErr != nil {
			return
		}
		if s.ironic, s.svcErr = ironictest.NewClient(s.services.IronicURL); s.svcErr != nil {
			return
		}
		s.inspector, s.svcErr = ironictest.NewInspectorClient(s.services.InspectorURL)
	})
	if s.svcErr != nil {
		t.Fatalf("start Ironic and ironic-inspector: %v", s.svcErr)
	}
	mark := s.services.Mark()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs written during the test:\n%s", mark.Since(64<<10))
		}
	})
	return s
}
