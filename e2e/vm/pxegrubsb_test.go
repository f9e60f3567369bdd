package vm

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// pxeGRUBSecureBootNode is the pxeNode that Ironic's pxe boot interface
// boots under UEFI with Secure Boot enforced: dnsmasq hands its firmware
// shim.
const pxeGRUBSecureBootNode = 4

// linuxPXETemplate is the [pxe]uefi_pxe_config_template of the Secure
// Boot bed and the aarch64 [pxe]pxe_config_template_by_arch of the arm64
// one: Ironic's own (pxe_grub_config.template) with linux and initrd
// where it says linuxefi and initrdefi, which Debian's signed GRUB (its
// linux verifies the kernel through shim) and GRUB for arm64 do not have. Ironic
// switches between the entries by rewriting "set default=".
const linuxPXETemplate = `set default=deploy
set timeout=5
set hidden_timeout_quiet=false

menuentry "deploy"  {
    linux {{ pxe_options.deployment_aki_path }} selinux=0 troubleshoot=0 text {{ pxe_options.pxe_append_params|default("", true) }} boot_server={{pxe_options.tftp_server}}
    initrd {{ pxe_options.deployment_ari_path }}
}

menuentry "boot_ramdisk"  {
    linux {{ pxe_options.aki_path }} root=/dev/ram0 text {{ pxe_options.pxe_append_params|default("", true) }} {{ pxe_options.ramdisk_opts|default('', true) }}
    initrd {{ pxe_options.ari_path }}
}
`

// secureBootPXENetwork is a provisioning network of t's own whose Ironic
// hands UEFI network boots Debian's signed chain, as docs/secure-boot.md
// tells operators: [pxe]loader_file_paths puts shim in the TFTP root as
// bootx64.efi (what dnsmasq hands the firmware) and the signed network
// GRUB (grubnetx64.efi.signed) beside it as grubx64.efi, the name shim
// fetches; [pxe]uefi_pxe_config_template is linuxPXETemplate.
func secureBootPXENetwork(t *testing.T) *pxeBed {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bc, err := qemu.FetchBootChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := filepath.Join(dir, "grub-pxe.template")
	if err := os.WriteFile(tmpl, []byte(linuxPXETemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	bed, err := startPXEBed(ctx, filepath.Join(dir, "provisioning"), "pxesbgrub", false, func(c *ironic.Config) {
		c.NetBoot.Loaders["bootx64.efi"] = bc.Shim
		c.NetBoot.Loaders["grubx64.efi"] = bc.GrubNet
		c.NetBoot.UEFIConfigTemplate = tmpl
	})
	if err != nil {
		t.Fatalf("Secure Boot provisioning network: %v", err)
	}
	reportSeconds(t, time.Since(start), "secureboot_pxe_bed_up_s")
	bed.closeAtEnd(t)
	return bed
}

// TestVMPXEGRUBSecureBoot is TestVMPXEGRUBUEFI's network boot under Secure
// Boot: a UEFI machine enforcing Secure Boot with Microsoft's keys
// enrolled, an ipmi node with Ironic's pxe boot interface on a bed whose
// Ironic gives it Debian's signed chain (secureBootPXENetwork). OVMF's PXE
// client gets shim (bootx64.efi) over TFTP, shim fetches grubx64.efi (the
// signed network GRUB) beside it and GRUB reads Ironic's grub/grub.cfg,
// then /<MAC>.conf from the template with linux and initrd, and loads the
// signed kernel and the initramfs over TFTP. The kernel locks itself down
// and the agent says Secure Boot is on; inspection and automated cleaning
// (metadata erase) complete through Ironic, then a deploy of the Secure
// Boot whole-disk image (osimage.SecureBootUEFIDisk), its ramdisk
// network-booted through shim too, after which the machine boots the disk
// with Secure Boot still enforced and the OS finds it on. Slow
// (E2E_VM_SLOW): four boots under OVMF with SMM.
func TestVMPXEGRUBSecureBoot(t *testing.T) {
	slowScenario(t)
	requireSecureBootFirmware(t)
	if series, err := ironic.SeriesFromEnv(); err == nil && !series.Host() {
		// The bed's loaders are files of the host's cache, which another
		// series' root filesystem does not see.
		t.Skipf("SKIPPED: the Secure Boot chain is handed to the host's Ironic only, not %s", series)
	}
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	p := newPXENodeCase(t, ctx, "uefi", pxeGRUBSecureBootNode, "pxe", true)
	bed, s, node := p.bed, p.s, p.node
	writeAt(t, p.disk, 0, pattern(64<<10, 0xa5))
	grub := watchFile(t, ctx, filepath.Join(bed.svc.TFTPRoot(), node.UUID, "config"))

	vm := p.l.Inspect(15*time.Minute).report(t, "inspection")
	p.l.WaitOff("inspection")
	p.checkSecureBootNetBoot("inspection", vm)
	data := s.inspectionData(t, ctx, node.UUID, time.Minute)
	inv, _ := data["inventory"].(map[string]any)
	checkInventory(t, inv, p.m)
	cmdline := p.checkGRUBBoot(vm, grub.last())
	checkParam(t, cmdline, "ipa-inspection-callback-url", bed.inspectionCallback())
	if s.agentInspection() {
		p.restorePXEEnabled()
	}

	vm = p.l.Provide(15*time.Minute).report(t, "cleaning")
	p.l.WaitOff("cleaning")
	p.checkSecureBootNetBoot("cleaning", vm)
	p.checkGRUBBoot(vm, grub.last())
	if b := readAt(t, p.disk, 0, 64<<10); slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
		t.Error("cleaning did not erase the start of the vblk disk")
	}

	// Deploy of the Secure Boot whole-disk image (its ESP carries
	// Debian's signed shim and GRUB), the ramdisk network-booted
	// through shim again; then Ironic boots the disk, the firmware
	// still enforcing Secure Boot.
	raw, _ := secureBootOSImage(t, ctx, p.m.Dir)
	const hostname, userData = "secureboot-pxe", "#!/bin/sh\necho secure boot pxe\n"
	vm, osVM := deployOS(t, ctx, osDeploy{s: s, node: node.UUID, bmc: p.bmc, l: p.l, firmware: "uefi",
		url: bed.serveImage(filepath.Base(raw), raw), path: raw, serial: pxeTarget,
		img: osBootImage{format: "raw", hostname: hostname, userData: userData}})
	p.checkSecureBootNetBoot("deploy", vm)
	p.checkGRUBBoot(vm, grub.last())
	checkDeployedSecureBoot(t, ctx, osVM)
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}

// checkDeployedSecureBoot checks that vm, the boot of a deployed
// secureBootOSImage, ran under the Secure Boot firmware and that the OS
// found Secure Boot enabled and the kernel locked down.
func checkDeployedSecureBoot(t *testing.T, ctx context.Context, vm *qemu.VM) {
	t.Helper()
	if !vm.Machine.SecureBoot || vm.Machine.SecureBootDisabled {
		t.Errorf("the boot after the deploy was not with the firmware enforcing Secure Boot: %s", qemu.ShellQuote(vm.Cmdline))
	}
	r, err := osimage.WaitReport(ctx, vm)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := vm.Find("BdsDxe: starting"); ok {
		t.Logf("OVMF: %s", l.Text[strings.Index(l.Text, "BdsDxe"):])
	}
	t.Logf("the deployed OS: secure boot %s", r.SecureBoot)
	if r.SecureBoot != "enabled, lockdown integrity" && r.SecureBoot != "enabled, lockdown confidentiality" {
		t.Errorf("the deployed OS says secure boot %q, want enabled with lockdown integrity or confidentiality", r.SecureBoot)
	}
}

// checkSecureBootNetBoot checks that vm, a network boot of the ramdisk,
// ran under Secure Boot through shim and the signed network GRUB from
// Ironic's TFTP root.
func (p *pxeNode) checkSecureBootNetBoot(what string, vm *qemu.VM) {
	t := p.t
	t.Helper()
	if vm == nil || !vm.Machine.SecureBoot {
		t.Fatalf("%s: the BMC's machine does not enforce Secure Boot", what)
	}
	if _, ok := vm.Find("Fetching Netboot Image grubx64.efi"); !ok {
		t.Errorf("%s: shim did not fetch grubx64.efi over the network", what)
	}
	if !strings.Contains(p.bed.net.DHCPLog(), "/tftpboot/grubx64.efi to ") {
		t.Errorf("%s: dnsmasq did not send grubx64.efi over TFTP", what)
	}
	checkAgentSecureBoot(t, what, vm)
}
