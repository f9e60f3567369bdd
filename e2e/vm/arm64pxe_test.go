package vm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// grubArm64Loader is the boot file of arm64 UEFI machines of PXE: the
// name Ironic's install guide gives GRUB for arm64 in
// [pxe]pxe_bootfile_name_by_arch.
const grubArm64Loader = "grubaa64.efi"

// arm64NetGRUB writes to dir the network GRUB for arm64 and returns its
// path: Debian's grub-efi-arm64-bin modules (qemu.GRUBDir) made into one
// image with the prefix /grub and the network modules, as Debian makes
// grubnetaa64.efi (grub-efi-arm64-bin ships the modules, not that image).
// Booted from the network, it reads grub/grub.cfg from the TFTP server
// it came from.
func arm64NetGRUB(t *testing.T, ctx context.Context, dir string) string {
	t.Helper()
	d, err := qemu.GRUBDir(ctx, qemu.Arm64)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "grubnetaa64.efi")
	// gzio: Debian's arm64 kernel, as the ramdisk ships it, is gzip'ed.
	// http: the same image boots over UEFI HTTP (arm64HTTPNetwork), as
	// Debian's grubnetaa64.efi does; booted so, Debian's GRUB reads its
	// files through the firmware's own HTTP client (net.mod's EFI
	// networking), http.mod being its fallback.
	cmd := exec.CommandContext(ctx, "grub-mkimage", "-O", "arm64-efi", "-d", d, "-p", "/grub", "-o", out,
		"efinet", "tftp", "http", "net", "normal", "configfile", "echo", "test", "linux", "gzio", "part_gpt", "fat", "search", "sleep")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("network GRUB for arm64: %s: %v: %s", strings.Join(cmd.Args, " "), err, b)
	}
	return out
}

// arm64PXENetwork is a provisioning network of t's own whose Ironic boots
// aarch64 nodes by GRUB over TFTP, as an operator configures it for an
// arm64 fleet beside an x86 one: [pxe]loader_file_paths puts the network
// GRUB for arm64 (arm64NetGRUB) in the TFTP root as grubaa64.efi, which
// dnsmasq hands to clients of architecture 11 (startPXEBed);
// [pxe]pxe_bootfile_name_by_arch names it for aarch64, and
// [pxe]pxe_config_template_by_arch gives aarch64 nodes linuxPXETemplate
// (Ironic's own template says linuxefi, which GRUB for arm64 lacks).
func arm64PXENetwork(t *testing.T) *pxeBed {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	grub := arm64NetGRUB(t, ctx, dir)
	tmpl := filepath.Join(dir, "grub-linux.template")
	if err := os.WriteFile(tmpl, []byte(linuxPXETemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	bed, err := startPXEBed(ctx, filepath.Join(dir, "provisioning"), "pxea64net", false, func(c *ironic.Config) {
		c.NetBoot.Loaders[grubArm64Loader] = grub
		c.NetBoot.BootfileByArch = map[string]string{"aarch64": grubArm64Loader}
		c.NetBoot.ConfigTemplateByArch = map[string]string{"aarch64": tmpl}
	})
	if err != nil {
		t.Fatalf("arm64 network-boot provisioning network: %v", err)
	}
	reportSeconds(t, time.Since(start), "arm64_pxe_bed_up_s")
	bed.closeAtEnd(t)
	return bed
}

// netNode is r as the checks of a GRUB network boot see it (a pxeNode
// whose firmware gets grubArm64Loader and whose kernel parameters are
// the node's).
func (r *redfishNode) netNode() *pxeNode {
	return &pxeNode{t: r.t, ctx: r.ctx, bed: r.bed, s: r.s, m: r.m, node: r.node, macs: [2]string{r.mac}, disk: r.disk,
		loader: grubArm64Loader, kernelParams: r.kernelParams, httpBoot: r.httpBoot}
}

// TestVMArm64PXEGRUB is an arm64 machine booted through Ironic's pxe boot
// interface: QEMU's virt machine with AAVMF (under TCG) behind its
// Redfish BMC, a redfish node with the pxe boot interface and cpu_arch
// aarch64, on arm64PXENetwork. Ironic sets the BMC's boot device to Pxe;
// AAVMF's PXE client asks as architecture 11 (ARM 64-bit UEFI) and
// dnsmasq hands it grubaa64.efi over TFTP; GRUB reads Ironic's
// grub/grub.cfg, then /<MAC>.conf, written from the aarch64 template,
// and loads the arm64 ramdisk's kernel and initramfs over TFTP with the
// node's kernel parameters (the PL011 console). Inspection (the
// inventory is the arm64 machine's) and automated cleaning (metadata
// erase) complete that way. Slow (E2E_VM_SLOW): two arm64 boots under
// TCG, each loading the ramdisk over TFTP.
func TestVMArm64PXEGRUB(t *testing.T) {
	slowScenario(t)
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Minute)
	defer cancel()
	r := newRedfishNode(t, ctx, "uefi", redfishArm64PXENode, redfishCase{arm64: true, netBoot: true})
	p := r.netNode()
	writeAt(t, r.disk, 0, pattern(64<<10, 0xa5))
	grub := watchFile(t, ctx, filepath.Join(r.bed.svc.TFTPRoot(), r.node.UUID, "config"))

	vm := r.l.Inspect(30*time.Minute).report(t, "inspection")
	r.l.WaitOff("inspection")
	cmdline := p.checkGRUBBoot(vm, grub.last())
	checkParam(t, cmdline, "ipa-inspection-callback-url", r.bed.inspectionCallback())
	// dnsmasq logs the PXE client's vendor class, which names its
	// architecture.
	if !strings.Contains(r.bed.net.DHCPLog(), "PXEClient:Arch:00011") {
		t.Error("no PXE client of architecture 11 (ARM 64-bit UEFI) in dnsmasq's log")
	}
	data := r.s.inspectionData(t, ctx, r.node.UUID, time.Minute)
	inv, _ := data["inventory"].(map[string]any)
	checkInventory(t, inv, r.m)
	if r.s.agentInspection() {
		p.restorePXEEnabled()
	}

	vm = r.l.Provide(30*time.Minute).report(t, "cleaning")
	r.l.WaitOff("cleaning")
	p.checkGRUBBoot(vm, grub.last())
	if b := readAt(t, r.disk, 0, 64<<10); slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
		t.Error("cleaning did not erase the start of the disk")
	}
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}
