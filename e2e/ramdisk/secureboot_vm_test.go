package ramdisk_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/bmc"
	"github.com/ironic-go/ironic-agent/internal/lockdown"
	ramdiskpkg "github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/testbed/fakeironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// secureBootGuest is the address the guest reaches the Ironic stand-in at
// (slirp's guestfwd to loopback).
const secureBootGuest = "10.0.2.100"

// secureBootISO builds the suite's ramdisk into an ISO: with the signed
// chain (the release's ESP) when signed, else grub-mkrescue's own
// unsigned GRUB (ramdisk.ISO, the ISO before the ESP existed).
func secureBootISO(t *testing.T, ctx context.Context, signed bool, cmdline, out string) {
	t.Helper()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !signed {
		if err := ramdiskpkg.ISO(ctx, rd.Kernel, rd.Initrd, cmdline, out); err != nil {
			t.Fatal(err)
		}
		return
	}
	signedISO(t, ctx, rd.Kernel, rd.Initrd, cmdline, out)
}

// signedISO builds into out an ISO of kernel and initrd with the signed
// chain (the release's ESP) as its UEFI entry.
func signedISO(t *testing.T, ctx context.Context, kernel, initrd, cmdline, out string) {
	t.Helper()
	esp := filepath.Join(filepath.Dir(out), ramdiskpkg.ESPName)
	if err := qemu.BuildESP(ctx, esp); err != nil {
		t.Fatal(err)
	}
	if err := ramdiskpkg.SecureBootISO(ctx, kernel, initrd, cmdline, esp, out, time.Time{}); err != nil {
		t.Fatal(err)
	}
}

// secureBootMachine is DefaultMachine under OVMF with Secure Boot
// enforced and Microsoft's keys enrolled, booting iso, with QEMU's BMC
// (KCS) for the inventory's IPMI read.
func secureBootMachine(t *testing.T, name string) qemu.Machine {
	m := qemu.DefaultMachine(qemu.UEFI)
	m.Name = name
	m.SecureBoot = true
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.MemoryMB = 1024
	m.BMC = &qemu.BMC{MfgID: 674, ProductID: 0x0100}
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.ISO = filepath.Join(m.Dir, "boot.iso")
	return m
}

// startLoopbackStandIn serves the Ironic stand-in (both APIs) on loopback
// and returns it with the guest forwards that reach it from
// secureBootGuest's ports 6385 and 5050.
func startLoopbackStandIn(t *testing.T) (ironicStandIn, map[string]string) {
	t.Helper()
	s := ironicStandIn{&fakeironic.Server{NodeUUID: standInNode, Token: standInToken}}
	fwd := map[string]string{}
	for _, port := range []string{"6385", "5050"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: s.Server, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
		fwd[secureBootGuest+":"+port] = l.Addr().String()
	}
	return s, fwd
}

// slowScenario skips t unless $E2E_VM_SLOW is 1: a boot of more than
// about a minute under emulation, kept out of the default run's time.
func slowScenario(t *testing.T) {
	t.Helper()
	if os.Getenv("E2E_VM_SLOW") != "1" {
		t.Skip("SKIPPED: slow scenario; E2E_VM_SLOW=1 runs it (docs/testing.md: Environment switches)")
	}
}

// slowSecureBootVM skips t unless it may boot a slow Secure Boot virtual
// machine here: root, no -short, E2E_VM_SLOW, the firmware and tools.
func slowSecureBootVM(t *testing.T) {
	t.Helper()
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine")
	}
	slowScenario(t)
	requireSecureBootHost(t)
}

// requireSecureBootHost skips without the Secure Boot firmware and the
// ISO tools.
func requireSecureBootHost(t *testing.T) {
	t.Helper()
	for _, p := range []string{qemu.OVMFSecureBootCode, qemu.OVMFSecureBootVars} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("SKIPPED: needs ovmf's Secure Boot firmware (test.sh installs it): %v", err)
		}
	}
	for _, p := range []string{"qemu-system-x86_64", "xorriso", "grub-mkrescue", "mformat", "mcopy"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (test.sh installs it)", p)
		}
	}
}

// secureBootCmdline is the ISO's kernel command line: the test bed's
// (qemu.KernelArgs) with loglevel=6, so the kernel's lockdown notices
// reach the console, and the agent's inspection
// against the stand-in.
const secureBootCmdline = "panic=-1 cryptomgr.notests no_timer_check loglevel=6 ipa-api-url=http://" + secureBootGuest + ":6385 ipa-inspection-callback-url=http://" + secureBootGuest + ":5050/v1/continue ipa-disk-wait-attempts=0"

// TestSecureBootInVM boots the ISO with Debian's signed chain (shim, GRUB,
// kernel) under OVMF enforcing Secure Boot with Microsoft's keys: the
// kernel says Secure Boot is on and locks itself down, and the agent,
// under lockdown, inspects the machine completely (SMBIOS, every disk,
// the NICs, the BMC over IPMI, UEFI boot mode). The kernel's "Lockdown:"
// lines, listed, say what it refused the agent, if anything.
func TestSecureBootInVM(t *testing.T) {
	slowSecureBootVM(t)
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()
	ironic, fwd := startLoopbackStandIn(t)
	m := secureBootMachine(t, "ironic-agent-secureboot")
	m.GuestFwd = fwd
	secureBootISO(t, ctx, true, secureBootCmdline, m.ISO)
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	fail := waitSecureBootAgent(t, ctx, vm)
	body, err := ironic.wait(ctx, "continue", 15*time.Minute)
	if err != nil {
		fail("no inspection data: %v; the stand-in saw %v", err, ironic.paths())
	}
	var data struct {
		Inventory struct {
			SystemVendor struct {
				Manufacturer string
				SerialNumber string `json:"serial_number"`
			} `json:"system_vendor"`
			Disks      []struct{ Name string }
			Interfaces []struct{ Name string }
			Boot       struct {
				CurrentBootMode string `json:"current_boot_mode"`
			}
			BMCAddress string `json:"bmc_address"`
		}
	}
	if err := json.Unmarshal(body, &data); err != nil {
		t.Fatalf("inspection data: %v", err)
	}
	inv := data.Inventory
	t.Logf("inventory under lockdown: vendor %+v, %d disks, %d interfaces, boot mode %s, BMC address %q",
		inv.SystemVendor, len(inv.Disks), len(inv.Interfaces), inv.Boot.CurrentBootMode, inv.BMCAddress)
	if inv.SystemVendor.Manufacturer != m.SMBIOS.SystemManufacturer || inv.SystemVendor.SerialNumber != m.SMBIOS.SystemSerial {
		t.Errorf("SMBIOS under lockdown: system vendor %+v, want %s, %s", inv.SystemVendor, m.SMBIOS.SystemManufacturer, m.SMBIOS.SystemSerial)
	}
	if len(inv.Disks) != len(m.Disks) || inv.Boot.CurrentBootMode != "uefi" || len(inv.Interfaces) != len(m.NICs) {
		t.Errorf("inventory under lockdown: %d disks (want %d), %d interfaces (want %d), boot mode %q (want uefi)",
			len(inv.Disks), len(m.Disks), len(inv.Interfaces), len(m.NICs), inv.Boot.CurrentBootMode)
	}
	if _, ok := vm.Find(logtext.Msg(bmc.EventBMCFound)); !ok {
		t.Errorf("the agent found no BMC over IPMI under lockdown")
	}
	// What lockdown refused, by whom: the agent itself must never be
	// refused; the programs it runs may probe (mdadm's Intel RST platform
	// check reads the option ROM through /dev/mem, which lockdown refuses
	// and mdadm does without).
	var refused []string
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, "Lockdown:") {
			refused = append(refused, strings.TrimSpace(l.Text))
			if strings.Contains(l.Text, "Lockdown: ironic-agent:") || strings.Contains(l.Text, "Lockdown: init:") {
				t.Errorf("lockdown refused the agent: %s", strings.TrimSpace(l.Text))
			}
		}
	}
	t.Logf("lockdown refused the guest %d time(s)%s", len(refused), strings.Join(append([]string{""}, refused...), "\n  "))
	vm.Kill()
}

// waitSecureBootAgent waits until the kernel in vm says Secure Boot is on
// and locks itself down, and the agent says so too; it returns a Fatalf
// that shows the end of the console.
func waitSecureBootAgent(t *testing.T, ctx context.Context, vm *qemu.VM) func(format string, args ...any) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\n%s", append(args, consoleTail(vm))...)
	}
	if _, err := vm.WaitFor(ctx, "EFI stub: UEFI Secure Boot is enabled"); err != nil {
		fail("the kernel's EFI stub never said Secure Boot is on: %v", err)
	}
	if _, err := vm.WaitFor(ctx, "Kernel is locked down from EFI Secure Boot"); err != nil {
		fail("the kernel never locked itself down: %v", err)
	}
	// The agent's own reading: efivarfs's SecureBoot variable and
	// securityfs's lockdown file.
	l, err := vm.WaitFor(ctx, logtext.Msg(lockdown.EventBootSecurity))
	if err != nil {
		fail("the agent never said what it found of Secure Boot: %v", err)
	}
	t.Logf("agent: %s", strings.TrimSpace(l.Text[strings.Index(l.Text, "msg="):]))
	if !strings.Contains(l.Text, "secure_boot=enabled") || !(strings.Contains(l.Text, "lockdown=integrity") || strings.Contains(l.Text, "lockdown=confidentiality")) {
		t.Errorf("the agent says %s, want Secure Boot enabled and lockdown integrity or confidentiality", strings.TrimSpace(l.Text))
	}
	t.Logf("kernel up under Secure Boot after %v", vm.Elapsed().Round(time.Second))
	return fail
}

// TestSecureBootNetBootInVM boots the ramdisk from the network with
// Secure Boot enforced, through the chain of docs/secure-boot.md: OVMF's
// PXE client gets Debian's shim over TFTP (QEMU's own DHCP and TFTP
// server, standing in for a provisioning network's), shim fetches
// grubx64.efi beside it, Debian's signed network GRUB
// (grubnetx64.efi.signed), which reads grub/grub.cfg from the same
// server, as Ironic's pxe boot interface lays its TFTP root out, and
// loads the signed kernel and the initramfs over TFTP with linux and
// initrd. The kernel locks itself down and the agent inspects the
// machine against the Ironic stand-in.
func TestSecureBootNetBootInVM(t *testing.T) {
	slowSecureBootVM(t)
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bc, err := qemu.FetchBootChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ironic, fwd := startLoopbackStandIn(t)
	m := secureBootMachine(t, "ironic-agent-secureboot-netboot")
	m.GuestFwd, m.ISO, m.NetBoot = fwd, "", true
	m.NICs = []qemu.NIC{{Model: "virtio-net-pci", MAC: "52:54:00:5b:00:01", Backend: qemu.NICUser, PXE: true}}
	m.TFTPRoot, m.TFTPBootFile = filepath.Join(m.Dir, "tftp"), "bootx64.efi"
	cfg := "set timeout=1\nmenuentry deploy {\n\tlinux /deploy_kernel " + qemu.KernelArgs + " " + secureBootCmdline + "\n\tinitrd /deploy_ramdisk\n}\n"
	if err := os.MkdirAll(filepath.Join(m.TFTPRoot, "grub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for dst, src := range map[string]string{"bootx64.efi": bc.Shim, "grubx64.efi": bc.GrubNet, "deploy_kernel": rd.Kernel, "deploy_ramdisk": rd.Initrd} {
		if err := qemu.CopyFile(src, filepath.Join(m.TFTPRoot, dst)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(m.TFTPRoot, "grub/grub.cfg"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if _, err := vm.WaitFor(ctx, "Fetching Netboot Image grubx64.efi"); err != nil {
		t.Fatalf("shim never fetched GRUB over the network: %v\n%s", err, consoleTail(vm))
	}
	fail := waitSecureBootAgent(t, ctx, vm)
	if _, err := ironic.wait(ctx, "continue", 15*time.Minute); err != nil {
		fail("no inspection data: %v; the stand-in saw %v", err, ironic.paths())
	}
	t.Logf("inspection data from the network boot under Secure Boot after %v", vm.Elapsed().Round(time.Second))
	vm.Kill()
}

// TestSecureBootRefusesUnsignedGRUB is the control of TestSecureBootInVM:
// the same firmware and variables refuse the ISO grub-mkrescue makes on
// its own (an unsigned GRUB as its UEFI entry), so a boot under
// TestSecureBootInVM's firmware proves the signed chain, not a firmware
// that checks nothing.
func TestSecureBootRefusesUnsignedGRUB(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine")
	}
	requireSecureBootHost(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	m := secureBootMachine(t, "ironic-agent-secureboot-control")
	m.Disks, m.NICs, m.BMC = nil, nil, nil
	secureBootISO(t, ctx, false, secureBootCmdline, m.ISO)
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	l, err := vm.WaitFor(ctx, "Access Denied")
	if err != nil {
		t.Fatalf("the firmware never refused the unsigned GRUB: %v\n%s", err, consoleTail(vm))
	}
	t.Logf("OVMF: %s", strings.TrimSpace(l.Text))
	if !strings.Contains(l.Text, "DVD-ROM") {
		t.Errorf("refused %q, want the CD's boot option", l.Text)
	}
	if l, ok := vm.Find("Linux version"); ok {
		t.Errorf("a kernel ran: %s", l.Text)
	}
	vm.Kill()
}

// TestSecureBootISOBootsBIOS boots the same ISO under SeaBIOS: its BIOS
// entry is grub-mkrescue's, as before the ESP, and the agent says there
// are no UEFI variables to read Secure Boot from.
func TestSecureBootISOBootsBIOS(t *testing.T) {
	slowSecureBootVM(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	m := qemu.DefaultMachine(qemu.BIOS)
	m.Name = "ironic-agent-secureboot-bios"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.Disks, m.NICs = nil, nil
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.ISO = filepath.Join(m.Dir, "boot.iso")
	secureBootISO(t, ctx, true, "panic=-1 cryptomgr.notests no_timer_check ipa-standalone=1 ipa-disk-wait-attempts=0 ironic_agent.dhcp_timeout=1", m.ISO)
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	l, err := vm.WaitFor(ctx, logtext.Msg(lockdown.EventBootSecurity))
	if err != nil {
		t.Fatalf("the agent never started from the ISO's BIOS entry: %v\n%s", err, consoleTail(vm))
	}
	if !strings.Contains(l.Text, "a BIOS boot") {
		t.Errorf("the agent under SeaBIOS says %s", strings.TrimSpace(l.Text))
	}
	t.Logf("agent up from the BIOS entry after %v", vm.Elapsed().Round(time.Second))
	vm.Kill()
}

// TestSecureBootOSDiskInVM boots internal/testbed/osimage's Secure Boot
// whole-disk image (osimage.SecureBootUEFIDisk: Debian's signed shim and
// GRUB in its ESP, the signed kernel in its root) under OVMF enforcing
// Secure Boot with Microsoft's keys, from its removable-media loader (no
// boot entry: that is the agent's, made in e2e/vm's
// TestVMRedfishSecureBoot): the firmware runs shim, shim GRUB, GRUB the
// kernel, and the OS reads the SecureBoot variable as enabled and the
// kernel's lockdown as on. The image e2e/vm deploys under Secure Boot
// boots by itself. Booted again with Secure Boot switched off in the
// firmware's setting (qemu.Machine.SecureBootDisabled, the bmcsim Redfish
// BMC's SecureBootEnable), the same machine, keys and NVRAM, the OS finds
// it off and the kernel not locked down.
func TestSecureBootOSDiskInVM(t *testing.T) {
	slowSecureBootVM(t)
	if m := osimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (in test.sh)", m)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	o, err := osimage.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	m := secureBootMachine(t, "ironic-agent-secureboot-os")
	m.ISO, m.NICs, m.BMC = "", nil, nil
	m.Disks = []qemu.Disk{{ID: "os", Kind: qemu.DiskVirtioBlk, Serial: "SB-OS-DISK"}}
	if err := o.SecureBootUEFIDisk(ctx, dir, m.DiskPath("os")); err != nil {
		t.Fatal(err)
	}
	vm, err := qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	l, err := vm.WaitFor(ctx, osimage.SecureBootLine)
	if err != nil {
		t.Fatalf("the OS never said what it found of Secure Boot: %v\n%s", err, consoleTail(vm))
	}
	got := strings.TrimSpace(l.Text[strings.Index(l.Text, osimage.SecureBootLine)+len(osimage.SecureBootLine):])
	t.Logf("the OS booted from the disk after %v: secure boot %s", l.At.Round(time.Second), got)
	if got != "enabled, lockdown integrity" && got != "enabled, lockdown confidentiality" {
		t.Errorf("the OS says secure boot %s, want enabled with lockdown integrity or confidentiality", got)
	}
	if _, ok := vm.Find("EFI stub: UEFI Secure Boot is enabled"); !ok {
		t.Errorf("the kernel's EFI stub did not say Secure Boot is on")
	}
	if _, ok := vm.Find(osimage.LoaderLine); !ok {
		t.Errorf("the kernel was not booted through the image's grub.cfg")
	}
	vm.Kill()

	// The same machine with Secure Boot switched off in the firmware's
	// setting (what a BMC's Redfish SecureBootEnable changes): the keys
	// and the NVRAM stay, nothing is verified, the OS finds it off.
	m.SecureBootDisabled = true
	vm, err = qemu.Start(ctx, m, qemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if l, err = vm.WaitFor(ctx, osimage.SecureBootLine); err != nil {
		t.Fatalf("the OS never said what it found of Secure Boot with the setting off: %v\n%s", err, consoleTail(vm))
	}
	got = strings.TrimSpace(l.Text[strings.Index(l.Text, osimage.SecureBootLine)+len(osimage.SecureBootLine):])
	t.Logf("with SecureBootEnable off: secure boot %s", got)
	if got != "disabled, lockdown none" {
		t.Errorf("with the firmware's Secure Boot setting off the OS says secure boot %s, want disabled, lockdown none", got)
	}
	vm.Kill()
}
