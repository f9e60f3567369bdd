package vm

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"

	"github.com/ironic-go/ironic-agent/internal/testbed/bmcsim"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// grubNetLoader is the network GRUB of grub-efi-amd64-bin: Debian's
// monolithic image with the prefix /grub, the one grub-efi-amd64-signed
// signs as grubnetx64.efi.signed. The bed hands it out as bootx64.efi,
// Ironic's [pxe]uefi_pxe_bootfile_name. The install guide puts shim
// (bootx64.efi) before it (grubx64.efi); OVMF here runs without Secure
// Boot, where shim only chains to GRUB, so the bed leaves it out.
const grubNetLoader = "/usr/lib/grub/x86_64-efi/monolithic/grubnetx64.efi"

// pxeGRUBNode is the pxeNode that Ironic's pxe boot interface boots under
// UEFI: dnsmasq hands its firmware GRUB.
const pxeGRUBNode = 3

// TestVMPXEGRUBUEFI is the lifecycle through Ironic's pxe boot interface
// under OVMF, as Ironic configures it for UEFI: OVMF's PXE client gets
// GRUB (bootx64.efi) over TFTP; GRUB reads grub/grub.cfg, the initial
// configuration Ironic puts in its TFTP root ([pxe]initial_grub_template),
// which goes on to /<MAC>.conf, Ironic's link to the node's config from
// [pxe]uefi_pxe_config_template; its "deploy" entry loads the ramdisk's
// kernel and initramfs over TFTP with the kernel parameters Ironic wrote.
// GRUB has no BOOTIF to pass: the ramdisk runs DHCP on every NIC and the
// agent must still reach Ironic through the provisioning NIC. Inspection,
// cleaning and a deploy of internal/testbed/osimage's UEFI disk with a config
// drive run that way; the deployed OS boots from the disk Ironic set as
// boot device and prints the config drive's hostname.
func TestVMPXEGRUBUEFI(t *testing.T) {
	slowScenario(t)
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()
	p := newPXENode(t, ctx, "uefi", pxeGRUBNode, "pxe")
	bed, s, node := p.bed, p.s, p.node
	// Something for cleaning's metadata erase to remove.
	writeAt(t, p.disk, 0, pattern(64<<10, 0xa5))
	grub := watchFile(t, ctx, filepath.Join(bed.svc.TFTPRoot(), node.UUID, "config"))

	vm := p.l.Inspect(10*time.Minute).report(t, "inspection")
	p.l.WaitOff("inspection")
	data := s.inspectionData(t, ctx, node.UUID, time.Minute)
	inv, _ := data["inventory"].(map[string]any)
	checkInventory(t, inv, p.m)
	if got := inv["bmc_address"]; got != p.m.BMC.LANAddress {
		t.Errorf("inventory bmc_address = %v, want Ironic's ipmi_address %s", got, p.m.BMC.LANAddress)
	}
	// No BOOTIF from GRUB: IPA then reports no boot interface either.
	if got := data["boot_interface"]; got != nil {
		t.Errorf("inspection boot_interface = %v, want none: GRUB passes no BOOTIF", got)
	}
	cmdline := p.checkGRUBBoot(vm, grub.last())
	checkParam(t, cmdline, "ipa-inspection-callback-url", bed.inspectionCallback())
	if s.agentInspection() {
		p.restorePXEEnabled()
	}
	checkParsed(t, vm, "inspection_callback_url", "inspection_collectors", "debug")

	vm = p.l.Provide(10*time.Minute).report(t, "cleaning")
	p.l.WaitOff("cleaning")
	cmdline = p.checkGRUBBoot(vm, grub.last())
	checkParam(t, cmdline, "ipa-api-url", "http://"+pxeNet.Addr().String()+":6385")
	checkParsed(t, vm, "api_url", "global_request_id")
	if b := readAt(t, p.disk, 0, 64<<10); slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
		t.Error("cleaning did not erase the start of the vblk disk")
	}
	checkRequestID(t, bed, cmdline)
	checkAgentAddress(t, vm)

	// Deploy the OS with a config drive; Ironic then sets the boot device
	// to disk and powers on, and OVMF boots the agent's NVRAM entry.
	imgPath, img := osImageUEFI(t, ctx)
	ops := append(imageInfo(bed.serveImage("osimage-uefi.raw", imgPath), img),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"serial": pxeTarget}})
	if err := nodes.Update(ctx, s.ironic.Service, node.UUID, ops).Err; err != nil {
		t.Fatal(err)
	}
	const hostname = "pxe-grub-uefi"
	cd := nodes.ConfigDrive{MetaData: map[string]any{"uuid": node.UUID, "hostname": hostname, "name": hostname},
		UserData: "#cloud-config\nhostname: " + hostname + "\n"}
	deploy := p.l.To(nodes.ProvisionStateOpts{Target: nodes.TargetActive, ConfigDrive: cd}, 10*time.Minute)
	reportSeconds(t, deploy.Took, "deploy_s")
	p.checkGRUBBoot(deploy.VM, grub.last())
	if got := p.bmc.BootDevice(); got != bmcsim.BootDisk {
		t.Errorf("BMC boot device after the deploy: %q, want disk", got)
	}
	if deploy.PowerOns != 2 {
		t.Errorf("deploy: %d power-ons, want 2 (ramdisk, then the disk)", deploy.PowerOns)
	}
	octx, ocancel := context.WithTimeout(ctx, 4*time.Minute)
	defer ocancel()
	r, err := osimage.WaitReport(octx, p.bmc.VM())
	if err != nil {
		t.Fatal(err)
	}
	if r.Hostname != hostname {
		t.Errorf("the deployed OS read hostname %q from the config drive, want %q", r.Hostname, hostname)
	}
	booted, _ := p.bmc.VM().Find(osimage.Booted)
	t.Logf("the deployed OS booted, config drive %s; %d power-ons", r.Drive, p.bmc.Boots())
	reportSeconds(t, booted.At, "os_init_s")
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}

// checkGRUBBoot checks that vm booted from the network through GRUB and
// Ironic's files over TFTP (the loader, the node's config through one of
// Ironic's links, the ramdisk), with no kernel handed to QEMU, and that the
// node's GRUB config (config, as Ironic wrote it) has the deploy entry of
// Ironic's template. It returns that entry's kernel parameters.
func (p *pxeNode) checkGRUBBoot(vm *qemu.VM, config string) string {
	t := p.t
	t.Helper()
	if vm == nil {
		t.Fatal("no VM for a network boot")
	}
	if slices.Contains(vm.Cmdline, "-kernel") {
		t.Errorf("a network boot was handed a kernel: %s", qemu.ShellQuote(vm.Cmdline))
	}
	loader, kernelParams := cmp.Or(p.loader, "bootx64.efi"), cmp.Or(p.kernelParams, pxeKernelParams)
	log := p.bed.net.DHCPLog()
	files := []string{loader, p.node.UUID + "/deploy_kernel", p.node.UUID + "/deploy_ramdisk"}
	if p.httpBoot {
		// Over HTTP GRUB searches no grub.cfg-01-<mac> (it does for a
		// tftp prefix only): grub.cfg beside it (httpGRUBConfig), then
		// /<MAC>.conf.
		for _, f := range append(files, "grub.cfg", p.macs[0]+".conf") {
			if len(p.bed.served("/"+f)) == 0 {
				t.Errorf("the HTTP boot did not fetch http://%s/%s (requests: %s)", pxeHTTP, f, strings.Join(p.bed.served("/"), ", "))
			}
		}
		for l := range strings.Lines(log) {
			if strings.Contains(l, "dnsmasq-tftp") && (strings.Contains(l, " sent ") || strings.Contains(l, " not found")) {
				t.Errorf("an HTTP boot used TFTP: %s", strings.TrimSpace(l))
			}
		}
	} else {
		// GRUB 2.06 (Debian 12's) reads Ironic's grub/grub.cfg, which
		// goes on to /<MAC>.conf; GRUB 2.12 first tries grub.cfg-01-<mac>
		// beside its image, Ironic's other link to the node's config, and
		// stops there.
		if !strings.Contains(log, "/tftpboot/grub.cfg-01-"+strings.ReplaceAll(p.macs[0], ":", "-")+" to ") {
			files = append(files, "grub/grub.cfg", p.macs[0]+".conf")
		}
		for _, f := range files {
			if !strings.Contains(log, "/tftpboot/"+f+" to ") {
				t.Errorf("dnsmasq did not send %s over TFTP", f)
			}
		}
	}
	kernel, initrd := grubDeployEntry(config)
	if kernel == nil || initrd == nil {
		t.Fatalf("Ironic's GRUB config for the node has no deploy entry with a kernel and an initrd:\n%s", config)
	}
	if want := p.node.UUID + "/deploy_kernel"; kernel[1] != want {
		t.Errorf("GRUB's deploy entry loads %s, want %s", kernel[1], want)
	}
	if want := p.node.UUID + "/deploy_ramdisk"; len(initrd) < 2 || initrd[1] != want {
		t.Errorf("GRUB's deploy entry loads the initrd %v, want %s", initrd[1:], want)
	}
	params := kernel[2:]
	for _, w := range append(strings.Fields(kernelParams), "selinux=0", "troubleshoot=0", "text", "ipa-debug=1",
		"boot_server="+pxeNet.Addr().String()) {
		if !slices.Contains(params, w) {
			t.Errorf("kernel line of Ironic's GRUB config lacks %q: %s", w, strings.Join(params, " "))
		}
	}
	return strings.Join(params, " ")
}

// restorePXEEnabled undoes what Ironic's built-in inspection (35) did to
// the ports after a boot without BOOTIF: its ports hook
// ([inspector]update_pxe_enabled, on by default) sets pxe_enabled on the
// port of the inventory's boot.pxe_interface only, which without BOOTIF is
// none, and from then on the pxe interface links the node's config to no
// MAC (it skips ports without pxe_enabled), so GRUB's next boot finds no
// /<MAC>.conf. IPA reports the same null boot interface. An operator puts
// the flag back, as this does.
func (p *pxeNode) restorePXEEnabled() {
	t := p.t
	t.Helper()
	port, err := p.s.ironic.PortByAddress(p.ctx, p.macs[0])
	if err != nil || port == nil {
		t.Fatalf("the port of %s after the inspection: %v, %v", p.macs[0], port, err)
	}
	if port.PXEEnabled {
		return
	}
	t.Logf("Ironic's inspection cleared pxe_enabled on the boot NIC's port %s (no BOOTIF from GRUB); setting it again", p.macs[0])
	if err := ports.Update(p.ctx, p.s.ironic.Service, port.UUID, ports.UpdateOpts{
		ports.UpdateOperation{Op: ports.ReplaceOp, Path: "/pxe_enabled", Value: true}}).Err; err != nil {
		t.Fatal(err)
	}
}

// grubDeployEntry is the kernel and initrd lines (as fields) of the
// "deploy" menu entry of a GRUB config of Ironic's template: linuxefi and
// initrdefi in Ironic 21.4, linux and initrd in newer ones.
func grubDeployEntry(config string) (kernel, initrd []string) {
	_, entry, ok := strings.Cut(config, `menuentry "deploy"`)
	if !ok {
		return nil, nil
	}
	entry, _, _ = strings.Cut(entry, "}")
	for l := range strings.Lines(entry) {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "linuxefi", "linux":
			kernel = f
		case "initrdefi", "initrd":
			initrd = f
		}
	}
	return kernel, initrd
}

// fileWatch keeps the contents a file had while a test ran, for files
// that live only during a step (Ironic removes a node's boot config when
// the step is over).
type fileWatch struct {
	mu   sync.Mutex
	seen []string
}

// watchFile polls path every 100 ms until the test ends.
func watchFile(t *testing.T, ctx context.Context, path string) *fileWatch {
	w := &fileWatch{}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
				w.mu.Lock()
				if len(w.seen) == 0 || w.seen[len(w.seen)-1] != string(b) {
					w.seen = append(w.seen, string(b))
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// last is the newest contents seen, "" if the file never existed.
func (w *fileWatch) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.seen) == 0 {
		return ""
	}
	return w.seen[len(w.seen)-1]
}
