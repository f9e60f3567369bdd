package vm

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/bmcsim"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// httpGRUBConfig is the grub.cfg beside the network GRUB in the HTTP
// root, which Ironic copies there as one more [pxe]loader_file_paths
// entry. Debian's GRUB (Red Hat's and SUSE's patches) booted over HTTP
// reads grub.cfg from the directory of its boot file's URL ($fw_path)
// before its prefix's grub/grub.cfg, the one Ironic writes; through the
// firmware's HTTP client it takes any file it asks for as found, so that
// grub.cfg must exist, and it is the one read. It goes on to the node's
// config through Ironic's /<MAC>.conf link, relative to GRUB's root, the
// HTTP server (over HTTP GRUB looks for no grub.cfg-01-<mac>: it does
// for a tftp prefix only).
const httpGRUBConfig = `echo Booting from $prefix

source /$net_default_mac.conf
`

// arm64HTTPNetwork is a provisioning network of t's own whose Ironic
// boots aarch64 nodes through its http boot interface (UEFI HTTP boot,
// Ironic >= 24.1), as an operator configures it for an arm64 fleet:
// [pxe]loader_file_paths puts the network GRUB for arm64 (arm64NetGRUB)
// in the HTTP root as grubaa64.efi, [pxe]pxe_bootfile_name_by_arch names
// it for aarch64, and dnsmasq hands its URL (http_url/grubaa64.efi) and
// vendor class HTTPClient to the node's firmware HTTP client (startPXEBed:
// the DHCP options Ironic's http interface asks its DHCP provider for);
// [pxe]tftp_root is the HTTP root (ironic.NetBoot.HTTPBoot), where the
// interface writes the node's GRUB configuration and its MAC links;
// httpGRUBConfig goes beside GRUB as grub.cfg, and
// [pxe]pxe_config_template_by_arch gives aarch64 nodes linuxPXETemplate.
// The files Ironic reads are below the services' directory, which a
// series run from a root filesystem sees bound in.
//
// The firmware and GRUB fetch everything from http_url, port 8088: UEFI
// HTTP boot takes a port in the URL, and Debian's GRUB booted over HTTP
// reads through the firmware's HTTP client with the same server and port.
func arm64HTTPNetwork(t *testing.T) *pxeBed {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	grub, err := os.ReadFile(arm64NetGRUB(t, ctx, dir))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	bed, err := startPXEBed(ctx, filepath.Join(dir, "provisioning"), "httpa64net", false, func(c *ironic.Config) {
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
		c.NetBoot.HTTPBoot = true
		c.NetBoot.Loaders[grubArm64Loader] = write("grubnetaa64.efi", grub)
		c.NetBoot.BootfileByArch = map[string]string{"aarch64": grubArm64Loader}
		c.NetBoot.ConfigTemplateByArch = map[string]string{"aarch64": write("grub-linux.template", []byte(linuxPXETemplate))}
		c.NetBoot.Loaders["grub.cfg"] = write("grub-http.cfg", []byte(httpGRUBConfig))
	})
	if err != nil {
		t.Fatalf("arm64 HTTP-boot provisioning network: %v", err)
	}
	reportSeconds(t, time.Since(start), "arm64_http_bed_up_s")
	bed.closeAtEnd(t)
	return bed
}

// checkHTTPBoot checks that vm, a boot of what (inspection, cleaning),
// came through UEFI HTTP as Ironic asked: the BMC's override was
// UefiHttp (not the Pxe Ironic falls back to when a BMC refuses it), the
// firmware's HTTP client (architecture 19, ARM 64-bit UEFI HTTP) asked
// dnsmasq, and it fetched GRUB from Ironic's HTTP root. It reports when
// the firmware started its HTTP boot and when GRUB ran.
func (r *redfishNode) checkHTTPBoot(vm *qemu.VM, what string) {
	t := r.t
	t.Helper()
	// Every power-on so far was one of these boots.
	ons := 0
	for _, e := range r.bmc.Events() {
		if !strings.HasPrefix(e, "power on ") {
			continue
		}
		ons++
		if !strings.Contains(e, "(boot "+bmcsim.RedfishBootUefiHttp+", ") {
			t.Errorf("%s: a power-on not through UefiHttp (Ironic falls back to Pxe where the BMC refuses it): %s", what, e)
		}
	}
	if ons == 0 {
		t.Errorf("%s: the BMC saw no power-on: %s", what, strings.Join(r.bmc.Events(), "; "))
	}
	log := r.bed.net.DHCPLog()
	if !strings.Contains(log, "HTTPClient:Arch:00019") {
		t.Errorf("%s: no UEFI HTTP client of architecture 19 (ARM 64-bit) in dnsmasq's log", what)
	}
	if strings.Contains(log, "PXEClient:Arch:") {
		t.Errorf("%s: the firmware tried PXE, which the BMC's UefiHttp boot switches off", what)
	}
	if len(r.bed.served("/"+grubArm64Loader)) == 0 {
		t.Errorf("%s: the firmware did not fetch http://%s/%s", what, pxeHTTP, grubArm64Loader)
	}
	if l, ok := vm.Find("Start HTTP Boot over IPv4"); ok {
		reportSeconds(t, l.At, what, "http_boot_start_s")
	} else {
		t.Errorf("%s: the firmware did not say it started an HTTP boot over IPv4", what)
	}
	if l, ok := vm.Find("Booting from (http,"); ok {
		t.Logf("%s: GRUB: %s", what, l.Text)
		reportSeconds(t, l.At, what, "grub_s")
	} else {
		t.Errorf("%s: GRUB did not say it booted from HTTP (httpGRUBConfig's echo)", what)
	}
}

// TestVMArm64HTTPBoot is an arm64 machine booted through Ironic's http
// boot interface (UEFI HTTP boot, new in Ironic 24.1, so it runs with
// IRONIC_SERIES=2025.1 or 2026.1): QEMU's virt machine with AAVMF (under
// TCG) behind its Redfish BMC, a redfish node with boot_interface http
// and cpu_arch aarch64, on arm64HTTPNetwork. Ironic sets the BMC's boot
// device to UefiHttp (the BMC accepts it: no fallback to Pxe), which the
// BMC boots as the NIC's HTTP boot option (AAVMF with its PXE clients
// off, qemu.Machine.HTTPBoot); AAVMF's HTTP client (vendor class
// HTTPClient:Arch:00019) gets http://10.99.0.1:8088/grubaa64.efi and
// option 60 HTTPClient, and runs GRUB, which reads grub.cfg beside itself
// (httpGRUBConfig), then /<MAC>.conf, written from the aarch64 template,
// and loads the arm64 ramdisk's kernel and initramfs over HTTP with the
// node's kernel parameters (the PL011 console). Nothing goes over TFTP. Inspection (the inventory is the arm64 machine's) and
// automated cleaning (metadata erase) complete that way. Slow
// (E2E_VM_SLOW): two arm64 boots under TCG.
func TestVMArm64HTTPBoot(t *testing.T) {
	slowScenario(t)
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Minute)
	defer cancel()
	r := newRedfishNode(t, ctx, "uefi", redfishArm64HTTPNode, redfishCase{arm64: true, netBoot: true, httpBoot: true})
	p := r.netNode()
	writeAt(t, r.disk, 0, pattern(64<<10, 0xa5))
	grub := watchFile(t, ctx, filepath.Join(r.bed.svc.TFTPRoot(), r.node.UUID, "config"))

	vm := r.l.Inspect(30*time.Minute).report(t, "inspection")
	r.l.WaitOff("inspection")
	cmdline := p.checkGRUBBoot(vm, grub.last())
	checkParam(t, cmdline, "ipa-inspection-callback-url", r.bed.inspectionCallback())
	r.checkHTTPBoot(vm, "inspection")
	// GRUB through the firmware's HTTP client: HEAD, then GET, and a
	// relative path after $fw_path's "/" (//NODE/deploy_kernel).
	t.Logf("HTTP requests of the inspection's boot (not Ironic's image downloads): %s", strings.Join(slices.DeleteFunc(r.bed.served("/"), func(s string) bool {
		return strings.Contains(s, " /images/")
	}), ", "))
	data := r.s.inspectionData(t, ctx, r.node.UUID, time.Minute)
	inv, _ := data["inventory"].(map[string]any)
	checkInventory(t, inv, r.m)
	if r.s.agentInspection() {
		p.restorePXEEnabled()
	}

	vm = r.l.Provide(30*time.Minute).report(t, "cleaning")
	r.l.WaitOff("cleaning")
	p.checkGRUBBoot(vm, grub.last())
	r.checkHTTPBoot(vm, "cleaning")
	if b := readAt(t, r.disk, 0, 64<<10); slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
		t.Error("cleaning did not erase the start of the disk")
	}
	t.Logf("BMC events: %s", strings.Join(r.bmc.Events(), "; "))
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}
