package hw

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/bmcsim"
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
	qemu.SkipUnlessRoot(t)
	for _, p := range []string{"ipmi_sim", "ipmitool", "qemu-system-x86_64"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (openipmi, ipmitool, qemu-system-x86; in test.sh)", p)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	m := bmcsim.OpenIPMIMachine(t, filepath.Join(t.TempDir(), "vm"))
	start := time.Now()
	s, err := bmcsim.StartIPMISim(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Logf("ipmi_sim answered after %s", time.Since(start).Round(time.Millisecond))
	ipmitool := func(args ...string) string {
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
