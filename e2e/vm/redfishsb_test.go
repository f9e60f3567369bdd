package vm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ramdiskpkg "github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// redfishSecureBootNode is the machine of TestVMRedfishSecureBoot.
const redfishSecureBootNode = 5

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
	mark := bed.svc.Mark()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs written during the test:\n%s", mark.Since(64<<10))
			t.Logf("HTTP requests: %s", strings.Join(bed.served("/"), ", "))
		}
		bed.Close()
	})
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
	// The kernel's own lockdown notice is below the console's log level
	// on Ironic's kernel line; the agent reads the lockdown securityfs file.
	if _, ok := vm.Find("EFI stub: UEFI Secure Boot is enabled"); !ok {
		t.Errorf("%s: the kernel's EFI stub did not say Secure Boot is on", what)
	}
	l, ok := vm.Find(`msg="boot security"`)
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
// erase) and a deploy of the test's whole-disk image complete. The
// image's EFI loader is unsigned: the firmware, still enforcing Secure
// Boot, refuses it at the boot after the deploy. Slow (E2E_VM_SLOW):
// four boots under OVMF with SMM.
func TestVMRedfishSecureBoot(t *testing.T) {
	slowScenario(t)
	for _, p := range []string{qemu.OVMFSecureBootCode, qemu.OVMFSecureBootVars} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("SKIPPED: needs ovmf's Secure Boot firmware (test.sh installs it): %v", err)
		}
	}
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

	// Deploy: the test's whole-disk image, whose EFI loader is unsigned.
	// The agent writes it and Ironic boots the disk; the firmware, still
	// enforcing Secure Boot, refuses that loader.
	img := setDeployImage(t, ctx, r.s, r.bed, r.node.UUID, "uefi", r.m.Dir, "redfish-image-secureboot.raw")
	vm = r.l.Deploy(15*time.Minute).report(t, "deploy")
	ib = r.checkISOBoot(vm)
	r.checkSecureBoot("deploy", vm, ib, esp)
	if got := readAt(t, r.disk, 1024, len(img)-1024); !bytes.Equal(got, img[1024:]) {
		t.Errorf("the disk %s does not hold the image", pxeTarget)
	}
	diskVM := r.bmc.VM()
	if diskVM.Machine.ISO != "" || !diskVM.Machine.SecureBoot {
		t.Errorf("the boot after the deploy was not from the disk with Secure Boot enforced: %s", qemu.ShellQuote(diskVM.Cmdline))
	}
	lctx, lcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer lcancel()
	if l, err := diskVM.WaitFor(lctx, "Access Denied"); err != nil {
		t.Errorf("the firmware did not refuse the image's unsigned loader: %v\n%s", err, consoleTail(diskVM, 30))
	} else {
		t.Logf("the firmware refused the deployed image's unsigned loader: %q", strings.TrimSpace(l.Text))
	}
	if _, ok := diskVM.Find(uefiLoaderSays); ok {
		t.Errorf("the deployed image's unsigned loader ran under Secure Boot")
	}
	t.Logf("BMC events: %s", strings.Join(r.bmc.Events(), "; "))
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}
