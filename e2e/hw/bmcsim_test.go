package hw

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/bmcsim"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestIPMISimOverLAN drives ipmi_sim with Debian's ipmitool over RMCP+
// (as Ironic's ipmitool power and management interfaces do): power on
// starts QEMU (firmware only: no disk, no kernel, so it costs next to
// nothing), status, boot device, cycle, off, and the LAN configuration the
// BMC reports. It needs no root. Cipher suite 3 (RAKP-HMAC-SHA1,
// HMAC-SHA1-96, AES-CBC-128), as Ironic's ipmi_cipher_suite sets it:
// ipmi_sim offers no SHA-256 suite, and ipmitool's default (17) costs each
// command about 9 s of probing before it falls back.
func TestIPMISimOverLAN(t *testing.T) {
	needIPMISim(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	m := bmcsim.OpenIPMIMachine(t, filepath.Join(t.TempDir(), "vm"))
	s, ipmitool := startIPMISim(t, ctx, m)
	if out := ipmitool("power", "status"); !strings.Contains(out, "is off") {
		t.Errorf("power status before power-on: %q", out)
	}
	ipmitool("chassis", "bootdev", "disk")
	if s.BootDevice() != bmcsim.BootDisk {
		t.Errorf("boot device %q after bootdev disk", s.BootDevice())
	}
	if out := ipmitool("chassis", "bootparam", "get", "5"); !strings.Contains(out, "Force Boot from default Hard-Drive") {
		t.Errorf("boot parameter 5 after bootdev disk: %q", out)
	}
	ipmitool("power", "on")
	vm, err := s.WaitBoot(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(vm.Cmdline, "-kernel") {
		t.Errorf("disk boot with a kernel: %s", qemu.ShellQuote(vm.Cmdline))
	}
	if out := ipmitool("power", "status"); !strings.Contains(out, "is on") {
		t.Errorf("power status after power-on: %q", out)
	}
	ipmitool("power", "cycle")
	// ipmi_sim powers off at once and on again once its 1 s timer sees
	// the power off.
	if _, err := s.WaitBoot(ctx, 1); err != nil {
		t.Fatal(err)
	}
	lan := ipmitool("lan", "print", "1")
	for _, want := range []string{"IP Address              : 127.77.0.9", "MAC Address             : 02:00:00:77:00:09"} {
		if !strings.Contains(lan, want) {
			t.Errorf("lan print lacks %q:\n%s", want, lan)
		}
	}
	ipmitool("power", "off")
	if err := s.WaitOff(ctx); err != nil {
		t.Fatal(err)
	}
	if out := ipmitool("power", "status"); !strings.Contains(out, "is off") {
		t.Errorf("power status after power-off: %q", out)
	}
	t.Logf("events: %s", strings.Join(s.Events(), "; "))
}

// TestIPMISimGuestReset checks that a guest's reset is not a power-off:
// the machine's boot sector prints a line and, a few seconds later,
// resets it (q35's reset control register), which -no-reboot turns into
// QEMU's exit. The BMC boots the machine again within the same power-on,
// as a server reboots without its BMC powering it off, and reports it on
// throughout: a BMC that called the reset a power-off had Ironic's
// power-state sync power the node on a second time (TestVMPXEGRUBUEFI's
// inspection, whose firmware reset itself on a first boot). Before the
// reset the test puts a sector that halts on the disk: a machine that
// reset on every boot kept the BMC restarting QEMU, and ipmi_sim, waiting
// on each restart, stopped answering ipmitool.
func TestIPMISimGuestReset(t *testing.T) {
	needIPMISim(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	m := bmcsim.OpenIPMIMachine(t, filepath.Join(t.TempDir(), "vm"))
	m.Disks = []qemu.Disk{{ID: "boot", Kind: qemu.DiskVirtioBlk, SizeMB: 1, Serial: "LAB-RESET-0001"}}
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	resets, err := osimage.BootSector(resetSays, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	halts, err := osimage.BootSector(againSays, 0)
	if err != nil {
		t.Fatal(err)
	}
	writeSector(t, m.DiskPath("boot"), resets)
	s, ipmitool := startIPMISim(t, ctx, m)
	ipmitool("chassis", "bootdev", "disk")
	ipmitool("power", "on")
	first, err := s.WaitBoot(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.WaitFor(ctx, resetSays); err != nil {
		t.Fatalf("%v; events: %s", err, strings.Join(s.Events(), "; "))
	}
	// The firmware has read the sector that resets; the next boot reads
	// the one that halts.
	writeSector(t, m.DiskPath("boot"), halts)
	// The reset ends the first QEMU; the BMC starts the next.
	select {
	case <-first.Done():
	case <-ctx.Done():
		t.Fatal("the guest's reset did not end its QEMU")
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	for !slices.ContainsFunc(s.Events(), func(e string) bool { return strings.HasPrefix(e, "reset by the guest: boots again") }) {
		select {
		case <-wctx.Done():
			t.Fatalf("no boot after the guest's reset; events: %s", strings.Join(s.Events(), "; "))
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !first.GuestReset() {
		t.Errorf("the first QEMU's exit was not taken for a guest reset")
	}
	if s.Boots() != 1 || !s.On() {
		t.Errorf("after the guest's reset: %d power-ons, on %v; want 1 and on", s.Boots(), s.On())
	}
	if out := ipmitool("power", "status"); !strings.Contains(out, "is on") {
		t.Errorf("power status after the guest's reset: %q", out)
	}
	if vm := s.VMOfBoot(1); vm == first {
		t.Errorf("VMOfBoot(1) is still the QEMU the guest reset")
	} else if _, err := vm.WaitFor(ctx, againSays); err != nil {
		t.Errorf("the boot after the reset: %v", err)
	}
	ipmitool("power", "off")
	if err := s.WaitOff(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range s.Events() {
		if strings.HasPrefix(e, "powered off by the guest") {
			t.Errorf("a guest reset counted as a power-off: %s", strings.Join(s.Events(), "; "))
		}
	}
	t.Logf("events: %s", strings.Join(s.Events(), "; "))
}

// What the boot sectors of TestIPMISimGuestReset print on the serial
// port: the first before it resets the machine, the second before it
// halts.
const (
	resetSays = "vmtest: resetting the machine"
	againSays = "vmtest: booted again after the reset"
)

// writeSector puts sector at the start of the disk image at path.
func writeSector(t *testing.T, path string, sector []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(sector, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// needIPMISim skips unless the BMC tests can run: root, ipmi_sim,
// ipmitool and QEMU.
func needIPMISim(t *testing.T) {
	t.Helper()
	qemu.SkipUnlessRoot(t)
	for _, p := range []string{"ipmi_sim", "ipmitool", "qemu-system-x86_64"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (openipmi, ipmitool, qemu-system-x86; in test.sh)", p)
		}
	}
}

// startIPMISim starts m's ipmi_sim, closed when the test ends, and
// returns it with a runner of Debian's ipmitool against its LAN channel,
// which fails the test when a command fails and logs each one's time.
func startIPMISim(t *testing.T, ctx context.Context, m qemu.Machine) (*bmcsim.IPMISim, func(args ...string) string) {
	t.Helper()
	start := time.Now()
	s, err := bmcsim.StartIPMISim(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	t.Logf("ipmi_sim answered after %s", time.Since(start).Round(time.Millisecond))
	return s, func(args ...string) string {
		t.Helper()
		a := append([]string{"-I", "lanplus", "-H", m.BMC.LANAddress, "-p", strconv.Itoa(m.BMC.LANPort), "-U", m.BMC.User, "-P", m.BMC.Password,
			"-L", "ADMINISTRATOR", "-R", "3", "-N", "2", "-C", "3"}, args...)
		t0 := time.Now()
		out, err := exec.CommandContext(ctx, "ipmitool", a...).Output()
		t.Logf("ipmitool %s: %s", strings.Join(args, " "), time.Since(t0).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("ipmitool %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}
