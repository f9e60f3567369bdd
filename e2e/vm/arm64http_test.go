package vm

import (
	"slices"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/testbed/bmcsim"
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
// boot interface (arm64NetBootScenario; UEFI HTTP boot, new in Ironic
// 24.1, so it runs with IRONIC_SERIES=2026.1). Ironic sets the BMC's boot
// device to UefiHttp (the BMC accepts it: no fallback to Pxe), which the
// BMC boots as the NIC's HTTP boot option (AAVMF with its PXE clients
// off, qemu.Machine.HTTPBoot); AAVMF's HTTP client (vendor class
// HTTPClient:Arch:00019) gets http://10.99.0.1:8088/grubaa64.efi and
// option 60 HTTPClient, and runs GRUB, which reads grub.cfg beside itself
// (httpGRUBConfig), then /<MAC>.conf, written from the aarch64 template,
// and loads the arm64 ramdisk's kernel and initramfs over HTTP with the
// node's kernel parameters (the PL011 console). Nothing goes over TFTP.
// Slow (E2E_VM_SLOW): two arm64 boots under TCG.
func TestVMArm64HTTPBoot(t *testing.T) {
	arm64NetBootScenario(t, redfishArm64HTTPNode, redfishCase{arm64: true, netBoot: true, httpBoot: true}, func(r *redfishNode, vm *qemu.VM, what string) {
		r.checkHTTPBoot(vm, what)
		// GRUB through the firmware's HTTP client: HEAD, then GET, and a
		// relative path after $fw_path's "/" (//NODE/deploy_kernel).
		t.Logf("%s: HTTP requests so far (not Ironic's image downloads): %s", what, strings.Join(slices.DeleteFunc(r.bed.served("/"), func(s string) bool {
			return strings.Contains(s, " /images/")
		}), ", "))
	})
}
