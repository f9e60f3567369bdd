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
	// http: the same image boots over UEFI HTTP (arm64NetBootNetwork), as
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

// arm64NetBootNetwork is a provisioning network of t's own whose Ironic
// network-boots aarch64 nodes with GRUB for arm64, as an operator
// configures it for an arm64 fleet beside an x86 one:
// [pxe]loader_file_paths puts the network GRUB for arm64 (arm64NetGRUB)
// in Ironic's roots as grubaa64.efi, [pxe]pxe_bootfile_name_by_arch
// names it for aarch64, and [pxe]pxe_config_template_by_arch gives
// aarch64 nodes linuxPXETemplate (Ironic's own template says linuxefi,
// which GRUB for arm64 lacks). The files Ironic reads are below the
// services' directory, which a series run from a root filesystem sees
// bound in.
//
// Without httpBoot (Ironic's pxe interface) dnsmasq hands grubaa64.efi
// over TFTP to clients of architecture 11 (startPXEBed). With httpBoot
// (Ironic's http interface, UEFI HTTP boot, Ironic >= 24.1) dnsmasq hands
// its URL (http_url/grubaa64.efi) and vendor class HTTPClient to the
// node's firmware HTTP client, as Ironic's http interface asks its DHCP
// provider to; [pxe]tftp_root is the HTTP root (ironic.NetBoot.HTTPBoot),
// where the interface writes the node's GRUB configuration and its MAC
// links; and httpGRUBConfig goes beside GRUB as grub.cfg. The firmware
// and GRUB then fetch everything from http_url, port 8088: UEFI HTTP boot
// takes a port in the URL, and Debian's GRUB booted over HTTP reads
// through the firmware's HTTP client with the same server and port.
func arm64NetBootNetwork(t *testing.T, httpBoot bool) *pxeBed {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	grub, err := os.ReadFile(arm64NetGRUB(t, ctx, dir))
	if err != nil {
		t.Fatal(err)
	}
	name, upFigure := "pxea64net", "arm64_pxe_bed_up_s"
	if httpBoot {
		name, upFigure = "httpa64net", "arm64_http_bed_up_s"
	}
	start := time.Now()
	bed, err := startPXEBed(ctx, filepath.Join(dir, "provisioning"), name, false, func(c *ironic.Config) {
		files := filepath.Join(c.Dir, "netboot")
		write := func(name string, b []byte) string {
			p := filepath.Join(files, name)
			if err := os.MkdirAll(files, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}
		c.NetBoot.Loaders[grubArm64Loader] = write("grubnetaa64.efi", grub)
		c.NetBoot.BootfileByArch = map[string]string{"aarch64": grubArm64Loader}
		c.NetBoot.ConfigTemplateByArch = map[string]string{"aarch64": write("grub-linux.template", []byte(linuxPXETemplate))}
		if httpBoot {
			c.NetBoot.HTTPBoot = true
			c.NetBoot.Loaders["grub.cfg"] = write("grub-http.cfg", []byte(httpGRUBConfig))
		}
	})
	if err != nil {
		t.Fatalf("arm64 network-boot provisioning network (HTTP boot %v): %v", httpBoot, err)
	}
	reportSeconds(t, time.Since(start), upFigure)
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
// interface (arm64NetBootScenario): AAVMF's PXE client asks as
// architecture 11 (ARM 64-bit UEFI) and dnsmasq hands it grubaa64.efi
// over TFTP; GRUB reads Ironic's grub/grub.cfg, then /<MAC>.conf, written
// from the aarch64 template, and loads the arm64 ramdisk's kernel and
// initramfs over TFTP with the node's kernel parameters (the PL011
// console). Slow (E2E_VM_SLOW): two arm64 boots under TCG, each loading
// the ramdisk over TFTP.
func TestVMArm64PXEGRUB(t *testing.T) {
	arm64NetBootScenario(t, redfishArm64PXENode, redfishCase{arm64: true, netBoot: true}, func(r *redfishNode, _ *qemu.VM, what string) {
		// dnsmasq logs the PXE client's vendor class, which names its
		// architecture.
		if !strings.Contains(r.bed.net.DHCPLog(), "PXEClient:Arch:00011") {
			t.Errorf("%s: no PXE client of architecture 11 (ARM 64-bit UEFI) in dnsmasq's log", what)
		}
	})
}

// arm64NetBootScenario runs arm64 machine n, a QEMU virt machine with
// AAVMF (under TCG) behind its Redfish BMC, enrolled as c says (a redfish
// node with a network boot interface and cpu_arch aarch64, on
// arm64NetBootNetwork), through inspection (the inventory is the arm64
// machine's) and automated cleaning (metadata erase). Each boot's GRUB
// and its kernel parameters are checked, then checkBoot checks what the
// boot interface adds ("inspection", "cleaning").
func arm64NetBootScenario(t *testing.T, n int, c redfishCase, checkBoot func(r *redfishNode, vm *qemu.VM, what string)) {
	slowScenario(t)
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Minute)
	defer cancel()
	r := newRedfishNode(t, ctx, "uefi", n, c)
	p := r.netNode()
	writeAt(t, r.disk, 0, pattern(64<<10, 0xa5))
	grub := watchFile(t, ctx, filepath.Join(r.bed.svc.TFTPRoot(), r.node.UUID, "config"))

	vm := r.l.Inspect(30*time.Minute).report(t, "inspection")
	r.l.WaitOff("inspection")
	cmdline := p.checkGRUBBoot(vm, grub.last())
	checkParam(t, cmdline, "ipa-inspection-callback-url", r.bed.inspectionCallback())
	checkBoot(r, vm, "inspection")
	data := r.s.inspectionData(t, ctx, r.node.UUID, time.Minute)
	inv, _ := data["inventory"].(map[string]any)
	checkInventory(t, inv, r.m)
	if r.s.agentInspection() {
		p.restorePXEEnabled()
	}

	vm = r.l.Provide(30*time.Minute).report(t, "cleaning")
	r.l.WaitOff("cleaning")
	p.checkGRUBBoot(vm, grub.last())
	checkBoot(r, vm, "cleaning")
	if b := readAt(t, r.disk, 0, 64<<10); slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
		t.Error("cleaning did not erase the start of the disk")
	}
	t.Logf("BMC events: %s", strings.Join(r.bmc.Events(), "; "))
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}
