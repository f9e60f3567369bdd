package vm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/lockdown"
	ramdiskpkg "github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// linuxGrubTemplate is the [DEFAULT]grub_config_template the Secure
// Boot and arm64 beds give Ironic: Ironic 21.4's own says linuxefi and
// initrdefi, commands neither Debian's signed GRUB of the kernel's
// release (its linux and initrd boot through shim's verification) nor
// GRUB for arm64 (whose linux is the EFI loader) has.
const linuxGrubTemplate = `set default=0
set timeout=1
menuentry "boot_partition" {
linux {{ linux }} {{ kernel_params }} --
initrd {{ initrd }}
}
`

// secureBootProvisioningNetwork is a provisioning network of t's own whose
// Ironic builds its UEFI ISOs with the ESP the release carries (Debian's
// signed shim and GRUB, from the kernel flavour's release) as
// [conductor]bootloader, and its GRUB configuration at
// ramdisk.GrubConfigPath, as docs/secure-boot.md tells operators.
func secureBootProvisioningNetwork(t *testing.T) *pxeBed {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	esp := filepath.Join(dir, ramdiskpkg.ESPName)
	if err := qemu.BuildESP(ctx, esp); err != nil {
		t.Fatal(err)
	}
	vm := &ironic.VirtualMediaUEFI{Bootloader: imageURL(ramdiskpkg.ESPName), GrubConfigPath: ramdiskpkg.GrubConfigPath, GrubConfigTemplate: linuxGrubTemplateFile(t, dir)}
	bed := vmediaProvisioningNetwork(t, ctx, dir, "pxesb", "secureboot", vm)
	bed.serveImage(ramdiskpkg.ESPName, esp)
	return bed
}

// vmediaProvisioningNetwork is a provisioning network of t's own, in
// namespace name-PID, whose Ironic builds its UEFI ISOs as vm says;
// what_bed_up_s is its start-up time.
func vmediaProvisioningNetwork(t *testing.T, ctx context.Context, dir, name, what string, vm *ironic.VirtualMediaUEFI) *pxeBed {
	t.Helper()
	start := time.Now()
	bed, err := startPXEBed(ctx, filepath.Join(dir, "provisioning"), name, false, func(c *ironic.Config) { c.VirtualMediaUEFI = vm })
	if err != nil {
		t.Fatalf("%s provisioning network: %v", what, err)
	}
	reportSeconds(t, time.Since(start), what+"_bed_up_s")
	bed.closeAtEnd(t)
	return bed
}

// checkSecureBoot checks that vm, a ramdisk boot from Ironic's ISO, ran
// under Secure Boot: the ISO's El Torito image is the release's ESP, the
// kernel's EFI stub saw Secure Boot on, and the agent reports it and the
// kernel's lockdown.
func (r *redfishNode) checkSecureBoot(what string, vm *qemu.VM, ib isoBoot, esp []byte) {
	t := r.t
	t.Helper()
	if !vm.Machine.SecureBoot {
		t.Fatalf("%s: the BMC's machine does not enforce Secure Boot", what)
	}
	// Ironic copies the ESP as it is to boot/grub/efiboot.img.
	if got := isoFile(t, r.ctx, ib.iso, "/boot/grub/efiboot.img"); !bytes.Equal(got, esp) {
		t.Errorf("%s: the ISO's boot/grub/efiboot.img (%d bytes) is not the release's ESP (%d bytes)", what, len(got), len(esp))
	}
	checkAgentSecureBoot(t, what, vm)
}

// checkAgentSecureBoot checks that vm, a ramdisk boot, ran under Secure
// Boot: the kernel's EFI stub saw it on, and the agent reports it and the
// kernel's lockdown.
func checkAgentSecureBoot(t *testing.T, what string, vm *qemu.VM) {
	t.Helper()
	// The kernel's own lockdown notice is below the console's log level
	// on Ironic's kernel line; the agent reads the lockdown securityfs file.
	if _, ok := vm.Find("EFI stub: UEFI Secure Boot is enabled"); !ok {
		t.Errorf("%s: the kernel's EFI stub did not say Secure Boot is on", what)
	}
	l, ok := vm.Find(logtext.Msg(lockdown.EventBootSecurity))
	if !ok {
		t.Errorf("%s: the agent did not say what it found of Secure Boot", what)
		return
	}
	t.Logf("%s: %s", what, strings.TrimSpace(l.Text[strings.Index(l.Text, "msg="):]))
	if !strings.Contains(l.Text, "secure_boot=enabled") || !(strings.Contains(l.Text, "lockdown=integrity") || strings.Contains(l.Text, "lockdown=confidentiality")) {
		t.Errorf("%s: the agent says %s, want Secure Boot enabled and lockdown integrity or confidentiality", what, strings.TrimSpace(l.Text))
	}
}

// linuxGrubTemplateFile writes linuxGrubTemplate into dir and returns
// its path.
func linuxGrubTemplateFile(t *testing.T, dir string) string {
	t.Helper()
	tmpl := filepath.Join(dir, "grub.template")
	if err := os.WriteFile(tmpl, []byte(linuxGrubTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// isoFile is the file at path in the ISO 9660 image iso.
func isoFile(t *testing.T, ctx context.Context, iso, path string) []byte {
	t.Helper()
	out, err := exec.CommandContext(ctx, "isoinfo", "-i", iso, "-R", "-x", path).Output()
	if err != nil {
		t.Fatalf("isoinfo -x %s on %s: %v", path, iso, err)
	}
	return out
}

// TestVMRedfishSecureBoot is Ironic booting the ramdisk under UEFI Secure
// Boot: a UEFI machine enforcing Secure Boot with Microsoft's keys
// enrolled, behind its Redfish BMC, a node of the redfish hardware type
// with the redfish-virtual-media boot interface, on an Ironic whose
// [conductor]bootloader is the ESP the release carries and whose
// grub_config_path is ramdisk.GrubConfigPath. For each ramdisk boot
// Ironic builds an ISO with that ESP as its El Torito image; the firmware
// runs Debian's shim, shim its GRUB, GRUB reads the configuration Ironic
// wrote on the ISO and boots the signed kernel, which locks itself down;
// the agent says so, and inspection, automated cleaning (metadata
// erase) and a deploy complete. The deploy is of a whole-disk image laid
// out as Debian installs its signed chain (osimage.SecureBootUEFIDisk:
// shim, GRUB and shim's BOOTX64.CSV in EFI/debian) with a config drive:
// the agent's boot entry names shim, as IPA's does, and at the boot
// after the deploy the firmware, still enforcing Secure Boot, runs shim
// through it, shim GRUB, GRUB the signed kernel, and the OS reads the
// SecureBoot variable as enabled, the kernel's lockdown as on, and the
// config drive. Slow (E2E_VM_SLOW): four boots under OVMF with SMM.
func TestVMRedfishSecureBoot(t *testing.T) {
	slowScenario(t)
	requireSecureBootFirmware(t)
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	r := newRedfishNode(t, ctx, "uefi", redfishSecureBootNode, redfishCase{secureBoot: true})
	r.bed.mu.Lock()
	espPath := r.bed.images[ramdiskpkg.ESPName]
	r.bed.mu.Unlock()
	esp, err := os.ReadFile(espPath)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, r.disk, 0, pattern(64<<10, 0xa5))

	vm := r.l.Inspect(15*time.Minute).report(t, "inspection")
	r.l.WaitOff("inspection")
	ib := r.checkISOBoot(vm)
	r.checkSecureBoot("inspection", vm, ib, esp)
	checkParam(t, ib.params, "ipa-inspection-callback-url", "http://"+pxeNet.Addr().String()+":5050/v1/continue")
	data := r.s.inspectionData(t, ctx, r.node.UUID, time.Minute)
	inv, _ := data["inventory"].(map[string]any)
	checkInventory(t, inv, r.m)
	if boot, _ := inv["boot"].(map[string]any); boot["current_boot_mode"] != "uefi" {
		t.Errorf("inventory: boot %v, want current_boot_mode uefi", boot)
	}

	vm = r.l.Provide(15*time.Minute).report(t, "cleaning")
	r.l.WaitOff("cleaning")
	ib = r.checkISOBoot(vm)
	r.checkSecureBoot("cleaning", vm, ib, esp)
	checkParam(t, ib.params, "ipa-api-url", "http://"+pxeNet.Addr().String()+":6385")
	if b := readAt(t, r.disk, 0, 64<<10); !bytes.Equal(b, make([]byte, 64<<10)) {
		t.Error("cleaning did not erase the start of the disk")
	}

	// Deploy: internal/testbed/osimage's Secure Boot whole-disk image,
	// with a config drive. The agent writes it and makes the boot entry
	// from the CSV beside shim; Ironic boots the disk, still enforcing
	// Secure Boot: the firmware runs shim through that entry, shim GRUB,
	// GRUB the signed kernel, and the OS finds Secure Boot on.
	const hostname, userData = "secureboot-os", "#!/bin/sh\necho secure boot\n"
	vm, diskVM := r.deploySecureBootOS(hostname, userData)
	ib = r.checkISOBoot(vm)
	r.checkSecureBoot("deploy", vm, ib, esp)
	if diskVM.Machine.SecureBootDisabled {
		t.Errorf("the boot after the deploy had Secure Boot switched off")
	}
	checkSecureBootOS(t, ctx, diskVM, agentShimEntry, hostname, userData)
	t.Logf("BMC events: %s", strings.Join(r.bmc.Events(), "; "))
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}

// requireSecureBootFirmware skips t without ovmf's Secure Boot firmware.
func requireSecureBootFirmware(t *testing.T) {
	t.Helper()
	for _, p := range []string{qemu.OVMFSecureBootCode, qemu.OVMFSecureBootVars} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("SKIPPED: needs ovmf's Secure Boot firmware (test.sh installs it): %v", err)
		}
	}
}

// deploySecureBootOS deploys secureBootOSImage to r's disk with a config
// drive of hostname and userData, checks that the disk holds the image
// and that Ironic then booted the machine from its disk with the Secure
// Boot firmware, and returns the VMs of the ramdisk's boot and of that
// boot.
func (r *redfishNode) deploySecureBootOS(hostname, userData string) (ramdiskVM, diskVM *qemu.VM) {
	t := r.t
	t.Helper()
	raw, img := secureBootOSImage(t, r.ctx, r.m.Dir)
	ops := append(imageInfo(r.bed.serveImage(filepath.Base(raw), raw), img),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"serial": pxeTarget}})
	if err := nodes.Update(r.ctx, r.s.ironic.Service, r.node.UUID, ops).Err; err != nil {
		t.Fatal(err)
	}
	cd := nodes.ConfigDrive{MetaData: map[string]any{"uuid": r.node.UUID, "hostname": hostname, "name": hostname}, UserData: userData}
	ramdiskVM = r.l.To(nodes.ProvisionStateOpts{Target: nodes.TargetActive, ConfigDrive: cd}, 15*time.Minute).report(t, "deploy")
	// The agent moved the GPT's backup header and added the config
	// drive's partition: the image's bytes from its first partition on.
	if got := readAt(t, r.disk, 1<<20, len(img)-2<<20); !bytes.Equal(got, img[1<<20:len(img)-1<<20]) {
		t.Errorf("the disk %s does not hold the image", pxeTarget)
	}
	diskVM = r.bmc.VM()
	if diskVM.Machine.ISO != "" || !diskVM.Machine.SecureBoot {
		t.Errorf("the boot after the deploy was not from the disk with the Secure Boot firmware: %s", qemu.ShellQuote(diskVM.Cmdline))
	}
	return ramdiskVM, diskVM
}

// secureBootOSImage builds in dir internal/testbed/osimage's whole-disk
// image with Debian's signed shim and GRUB in its ESP
// (osimage.SecureBootUEFIDisk) and returns its path and bytes.
func secureBootOSImage(t *testing.T, ctx context.Context, dir string) (string, []byte) {
	t.Helper()
	if m := osimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (in test.sh)", m)
	}
	start := time.Now()
	dir = filepath.Join(dir, "osimage")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o, err := osimage.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(dir, "os-secureboot.raw")
	if err := o.SecureBootUEFIDisk(ctx, dir, raw); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	reportSeconds(t, time.Since(start), "os_image_build_s")
	return raw, img
}

// agentShimEntry is OVMF's line for its first boot option when that is
// the agent's boot entry for shim: the label and loader of the image's
// BOOTX64.CSV, not the removable-media path.
var agentShimEntry = regexp.MustCompile(`BdsDxe: loading Boot[0-9A-F]{4} "` + osimage.SignedLabel + `" from HD\(1,GPT,[0-9A-F-]{36},0x800,0x[0-9A-F]+\)/\\` +
	strings.ReplaceAll(osimage.SignedDir, "/", `\\`) + `\\shimx64\.efi$`)

// checkSecureBootOS checks that vm, the boot from the disk after a deploy
// of secureBootOSImage, started with the boot option firstBoot matches
// (agentShimEntry: the agent's entry for shim; nil: any), that the OS
// found Secure Boot enabled and the kernel locked down, read the config
// drive's hostname and user-data, and powered off.
func checkSecureBootOS(t *testing.T, ctx context.Context, vm *qemu.VM, firstBoot *regexp.Regexp, hostname, userData string) {
	t.Helper()
	octx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	first, err := vm.WaitFor(octx, "BdsDxe: ")
	if err != nil {
		t.Fatalf("the firmware never tried a boot option: %v\n%s", err, consoleTail(vm, 30))
	}
	if firstBoot != nil && !firstBoot.MatchString(first.Text) {
		t.Errorf("OVMF's first boot option: %q, want a line matching %s", first.Text, firstBoot)
	}
	r, err := osimage.WaitReport(octx, vm)
	if err != nil {
		t.Fatalf("%v\n%s", err, consoleTail(vm, 30))
	}
	t.Logf("the deployed OS booted: %s; secure boot %s; config drive %s", strings.TrimSpace(first.Text[strings.Index(first.Text, "BdsDxe"):]), r.SecureBoot, r.Drive)
	if r.SecureBoot != "enabled, lockdown integrity" && r.SecureBoot != "enabled, lockdown confidentiality" {
		t.Errorf("the deployed OS says secure boot %q, want enabled with lockdown integrity or confidentiality", r.SecureBoot)
	}
	if _, ok := vm.Find("EFI stub: UEFI Secure Boot is enabled"); !ok {
		t.Errorf("the deployed OS's kernel did not say Secure Boot is on")
	}
	if r.Hostname != hostname || r.UserData != userData || !r.HasUserData {
		t.Errorf("the deployed OS read hostname %q and user-data %q from the config drive; want %q and %q", r.Hostname, r.UserData, hostname, userData)
	}
	if err := vm.Wait(octx); err != nil {
		t.Errorf("the deployed OS did not power off: %v", err)
	}
	if booted, ok := vm.Find(osimage.Booted); ok {
		reportSeconds(t, booted.At, "os_init_s")
	}
}
