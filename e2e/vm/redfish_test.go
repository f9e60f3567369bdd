package vm

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	ramdiskpkg "github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/netup"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/vmedia"
	"github.com/ironic-go/ironic-agent/internal/testbed/bmcsim"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// The provisioning network's Redfish BMCs listen on an address of the
// namespace each (10.99.0.21 + n), on this port: no host port is taken.
const redfishPort = 8000

// redfishNode is one machine on the provisioning network behind a
// bmcsim.RedfishBMC, enrolled in the bed's Ironic as a redfish node with
// the redfish-virtual-media boot interface, manageable.
type redfishNode struct {
	t    *testing.T
	ctx  context.Context
	bed  *pxeBed
	s    *suite
	m    qemu.Machine
	bmc  *bmcsim.RedfishBMC
	node *nodes.Node
	mac  string
	disk string
	// l drives the node: Redfish power, virtual media.
	l *lifecycle
	// prebuilt: the node boots a prebuilt ISO (driver_info deploy_iso),
	// its parameters on the USB stick.
	prebuilt bool
	// secureBoot: Secure Boot enforced, the ISOs booted through the
	// release's ESP ([conductor]bootloader), whose GRUB reads
	// ramdisk.GrubConfigPath.
	secureBoot bool
	// kernelParams are the operator's kernel parameters Ironic puts on
	// each ISO's kernel line ([redfish]kernel_append_params, or the
	// node's driver_info).
	kernelParams string
	// httpBoot: the node network-boots through Ironic's http boot
	// interface (redfishCase.httpBoot).
	httpBoot bool
}

// redfishMAC is the MAC of redfishNode n's NIC.
func redfishMAC(n int) string { return fmt.Sprintf("52:54:00:6d:%02x:01", 0x30+n) }

// The redfishNode numbers, one per scenario: each number is its own MAC,
// BMC address and tap, so no two scenarios share a machine's identity.
const (
	// redfishDHCPLess is the redfishNode that boots with no DHCP server
	// for it: dnsmasq ignores its MAC (netbed.DHCP.Ignore).
	redfishDHCPLess      = 2
	redfishTLSNode       = 3
	redfishRemovableNode = 4
	// redfishSecureBootNode is the machine of TestVMRedfishSecureBoot.
	redfishSecureBootNode = 5
	// redfishSecureBootCapabilityNode is the machine of
	// TestVMRedfishSecureBootCapability.
	redfishSecureBootCapabilityNode = 6
	// redfishArm64Node is the machine of TestVMArm64Lifecycle.
	redfishArm64Node = 7
	// redfishUSBCDNode is the machine of TestVMRedfishUSBCDUEFI.
	redfishUSBCDNode = 8
	// redfishArm64PXENode is the machine of TestVMArm64PXEGRUB, which
	// network-boots: its MAC is among the provisioning network's PXE
	// machines.
	redfishArm64PXENode = 9
	// redfishSecureBootPartitionNode is the machine of
	// TestVMRedfishSecureBootPartition.
	redfishSecureBootPartitionNode = 10
	// redfishSecureBootGrubInstallNode is the machine of
	// TestVMRedfishSecureBootGrubInstall.
	redfishSecureBootGrubInstallNode = 11
	// redfishArm64HTTPNode is the machine of TestVMArm64HTTPBoot, which
	// boots over UEFI HTTP: its MAC is among the provisioning network's
	// HTTP-boot machines.
	redfishArm64HTTPNode = 12
)

// redfishCase is what a virtual-media scenario changes.
type redfishCase struct {
	// dhcpLess gives the node network_data (a static address) and no
	// DHCP server answers it.
	dhcpLess    bool
	networkData map[string]any // set from dhcpLess
	// tls runs the scenario on a provisioning network of its own whose
	// Ironic serves HTTPS and puts its CA on the ISOs ([agent]api_ca_file).
	tls bool
	// removable sets driver_info deploy_iso to a prebuilt ISO with no
	// ipa-* parameters and config_via_removable: the parameters come on
	// the BMC's USB stick.
	removable bool
	// secureBoot runs the machine with Secure Boot enforced on a
	// provisioning network of its own whose Ironic boots it through the
	// release's ESP (secureBootProvisioningNetwork).
	secureBoot bool
	// secureBootOff starts the secureBoot machine with Secure Boot
	// switched off in its firmware's setting (the BMC's SecureBootEnable
	// false), and enrolls the node with the secure_boot capability and
	// automated cleaning off: Ironic switches it on for the deployed OS.
	secureBootOff bool
	// arm64 makes the machine qemu.Arm64Machine, booting the arm64
	// ramdisk through an ESP of GRUB for arm64, with the kernel
	// parameters of its PL011 console in the node's driver_info.
	arm64 bool
	// usbCD attaches the BMC's virtual CD as a USB CD-ROM on xHCI
	// (qemu.Machine.ISOOnUSB), as iDRAC and iLO present it, instead of
	// an ide-cd on AHCI.
	usbCD bool
	// inspectionOnly ends the scenario after inspection.
	inspectionOnly bool
	// netBoot enrolls the node with Ironic's pxe boot interface: its NIC
	// network-boots GRUB from the provisioning network (with arm64:
	// arm64NetBootNetwork's).
	netBoot bool
	// httpBoot, with netBoot, enrolls it with Ironic's http boot
	// interface instead (UEFI HTTP boot; with arm64: arm64NetBootNetwork's),
	// which needs a series newer than the host's (Series.HasHTTPBoot).
	httpBoot bool
	// noAutomatedClean enrolls the node with automated cleaning off.
	noAutomatedClean bool
	// diskMB is the size of the machine's disk (0: 5 GiB).
	diskMB int
	// kernelParams are added to the node's kernel parameters (its
	// driver_info kernel_append_params).
	kernelParams string
}

// newRedfishNode skips unless the virtual-media tests can run, and makes
// machine n under firmware fw behind its Redfish BMC, enrolled as c says.
func newRedfishNode(t *testing.T, ctx context.Context, fw string, n int, c redfishCase) *redfishNode {
	t.Helper()
	// Before the ramdisk: a skip builds nothing.
	if series, err := ironic.SeriesFromEnv(); err != nil {
		t.Fatal(err)
	} else if c.httpBoot && !series.HasHTTPBoot() {
		t.Skipf("SKIPPED: Ironic's http boot interface is new in 2024.1 (Ironic 24.1): %s lacks it; set %s=2026.1", series, ironic.SeriesEnv)
	} else if c.httpBoot && !series.HasNetBootLoaders() {
		// The bed's Ironic is given every network boot loader, which the
		// series' root filesystem must carry.
		t.Skipf("SKIPPED: the root filesystem of %s lacks the boot loaders the provisioning network hands out (syslinux-common, grub-efi-amd64-bin); set %s=2026.1", series, ironic.SeriesEnv)
	} else if !c.httpBoot && !series.Host() {
		t.Skipf("SKIPPED: the provisioning network runs the host's Ironic (2023.1) only, not %s", series)
	}
	networkData := c.networkData
	var rd *qemu.Ramdisk
	if c.arm64 {
		rd = arm64Ramdisk(t, ctx)
	} else {
		rd = ramdisk(t)
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: a provisioning network in a namespace, Ironic, dnsmasq and the BMC in it")
	}
	need := map[string]string{"dnsmasq": "dnsmasq-base", "mkisofs": "genisoimage", "isoinfo": "genisoimage"}
	if fw == "uefi" {
		need["grub-mkimage"], need["mkfs.fat"], need["mcopy"] = "grub-common", "dosfstools", "mtools"
	}
	files := map[string]string{"/usr/lib/ISOLINUX/isolinux.bin": "isolinux", "/usr/lib/syslinux/modules/bios/ldlinux.c32": "syslinux-common",
		"/usr/lib/python3/dist-packages/sushy/__init__.py": "python3-sushy"}
	if fw == "uefi" {
		files["/usr/lib/grub/x86_64-efi/linuxefi.mod"] = "grub-efi-amd64-bin"
	}
	if c.removable {
		// ramdisk.ISO's tools, and mtools to read the stick.
		need["grub-mkrescue"], need["xorriso"], need["mformat"], need["mtype"] = "grub-common", "xorriso", "mtools", "mtools"
		files["/usr/lib/grub/i386-pc/cdboot.img"] = "grub-pc-bin"
	}
	for p, pkg := range need {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (Debian package %s; in test.sh)", p, pkg)
		}
	}
	for f, pkg := range files {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("SKIPPED: needs %s (Debian package %s; in test.sh)", f, pkg)
		}
	}
	var bed *pxeBed
	switch {
	case c.tls:
		bed = tlsProvisioningNetwork(t)
	case c.secureBoot:
		bed = secureBootProvisioningNetwork(t)
	case c.arm64 && c.netBoot:
		bed = arm64NetBootNetwork(t, c.httpBoot)
	case c.arm64:
		bed = arm64ProvisioningNetwork(t)
	default:
		bed = provisioningNetwork(t)
	}
	r := &redfishNode{t: t, ctx: ctx, bed: bed, s: bed.s, mac: redfishMAC(n), prebuilt: c.removable, secureBoot: c.secureBoot, kernelParams: pxeKernelParams,
		httpBoot: c.netBoot && c.httpBoot}
	m := qemu.DefaultMachine(qemu.Firmware(fw))
	m.Name = "ironic-agent-redfish-" + fw
	if c.arm64 {
		m = qemu.Arm64Machine()
		m.Name = "ironic-agent-redfish-arm64"
		// The conductor's [redfish]kernel_append_params name x86's
		// serial port; the node's own name the virt machine's PL011.
		r.kernelParams = "nofb nomodeset " + qemu.KernelArgsArm64
	}
	m.SecureBoot = c.secureBoot
	m.SecureBootDisabled = c.secureBootOff
	m.ISOOnUSB = c.usbCD
	m.Dir = vmDir(t)
	// One NIC, on the provisioning network: Ironic's noop network gives
	// the ramdisk no BOOTIF, so the init goes on with the first NIC that
	// leases, and a second one answering DHCP could be that NIC.
	m.NICs = []qemu.NIC{{Model: "virtio-net-pci", MAC: r.mac, Backend: qemu.NICTap, PXE: c.netBoot}}
	m.Disks = []qemu.Disk{{ID: "vblk", Kind: qemu.DiskVirtioBlk, SizeMB: cmp.Or(c.diskMB, 5<<10), Serial: pxeTarget}}
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	r.m, r.disk = m, m.DiskPath("vblk")
	bmcAddr := netip.AddrFrom4([4]byte{10, 99, 0, byte(21 + n)})
	if err := bed.net.AddAddress(ctx, bmcAddr); err != nil {
		t.Fatal(err)
	}
	tap, err := bed.net.AddTap(ctx, fmt.Sprintf("rftap%d", n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tap.Close() })
	const user, password = "ironic", "redfish-s3cret"
	r.bmc, err = bmcsim.StartRedfishBMC(ctx, m, qemu.Options{Tap: tap, Netns: bed.net.Name},
		bmcsim.RedfishConfig{Addr: fmt.Sprintf("%s:%d", bmcAddr, redfishPort), User: user, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("BMC events: %s", strings.Join(r.bmc.Events(), "; "))
			if vm := r.bmc.VM(); vm != nil {
				t.Logf("serial console of the last boot (end; all of it in %s):\n%s", vm.LogPath, consoleTail(vm, 100))
			}
		}
		r.bmc.Close()
	})
	driverInfo := map[string]any{
		"redfish_address":   r.bmc.URL(),
		"redfish_system_id": "/redfish/v1/Systems/system",
		"redfish_username":  user,
		"redfish_password":  password,
		"deploy_kernel":     bed.serveImage("deploy.kernel", rd.Kernel),
		"deploy_ramdisk":    bed.serveImage("deploy.initramfs", rd.Initrd),
	}
	if fw == "uefi" && !c.secureBoot {
		// The ESP Ironic 21.4 puts into a UEFI ISO as its El Torito image.
		if c.arm64 {
			if !c.netBoot {
				driverInfo["bootloader"] = bed.serveImage(arm64ESPName, redfishESP(t, ctx, qemu.Arm64))
			}
			driverInfo["kernel_append_params"] = r.kernelParams
		} else {
			driverInfo["bootloader"] = bed.serveImage("redfish-esp.img", redfishESP(t, ctx, ""))
		}
	}
	if c.kernelParams != "" {
		r.kernelParams += " " + c.kernelParams
		driverInfo["kernel_append_params"] = r.kernelParams
	}
	if c.removable {
		// The project's own ISO (make iso) with boot_method=vmedia and
		// no ipa-* parameter: Ironic builds nothing and can put the
		// parameters only on the removable medium.
		iso := filepath.Join(m.Dir, ramdiskpkg.ISOName)
		if err := ramdiskpkg.ISO(ctx, rd.Kernel, rd.Initrd, "", iso); err != nil {
			t.Fatalf("prebuilt ISO: %v", err)
		}
		delete(driverInfo, "deploy_kernel")
		delete(driverInfo, "deploy_ramdisk")
		driverInfo["deploy_iso"] = bed.serveImage("prebuilt-"+fw+".iso", iso)
		driverInfo["config_via_removable"] = true
	}
	spec := ironic.NodeSpec{Name: fmt.Sprintf("vm-redfish-%s-%d", m.Name[len("ironic-agent-redfish-"):], n), InspectInterface: r.s.inspectInterface(), Redfish: driverInfo,
		Properties: map[string]any{"capabilities": "boot_mode:" + fw, "vendor": nil}}
	if c.arm64 {
		spec.Properties["cpu_arch"] = "aarch64"
	}
	if c.netBoot {
		spec.BootInterface = "pxe"
		if c.httpBoot {
			spec.BootInterface = "http"
		}
	}
	if c.secureBootOff || c.noAutomatedClean {
		noClean := false
		spec.AutomatedClean = &noClean
	}
	if c.secureBootOff {
		spec.Properties["capabilities"] = "boot_mode:" + fw + ",secure_boot:true"
	}
	r.node = ironic.Enroll(t, ctx, r.s.ironic, spec, r.mac)
	r.l = &lifecycle{t: t, ctx: ctx, ironic: r.s.ironic, node: r.node.UUID, power: redfishPower, boot: virtualMedia, bmc: r.bmc}
	if c.netBoot {
		r.l.boot = netBoot
	}
	if networkData != nil {
		// network_data is API 1.66.
		svc := *r.s.ironic.Service
		svc.Microversion = "1.66"
		if err := nodes.Update(ctx, &svc, r.node.UUID, nodes.UpdateOpts{
			nodes.UpdateOperation{Op: nodes.AddOp, Path: "/network_data", Value: networkData}}).Err; err != nil {
			t.Fatalf("set the node's network_data: %v", err)
		}
	}
	return r
}

// redfishESP is an EFI system partition image with GRUB for arch ("":
// amd64, or qemu.Arm64) at the removable path, whose embedded
// configuration finds Ironic's grub.cfg on the ISO (EFI/BOOT/grub.cfg,
// [DEFAULT]grub_config_path) and reads it.
func redfishESP(t *testing.T, ctx context.Context, arch string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "embed.cfg")
	if err := os.WriteFile(cfg, []byte("search --no-floppy --file --set=root /EFI/BOOT/grub.cfg\nset prefix=($root)/EFI/BOOT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// linuxefi and initrdefi: the commands of Ironic's grub template.
	format, name, modules := "x86_64-efi", "BOOTX64.EFI", []string{"linuxefi"}
	var grubDir []string
	if arch == qemu.Arm64 {
		// GRUB for arm64 has no linuxefi (arm64ProvisioningNetwork's
		// template says linux); Debian's arm64 kernel, as the ramdisk
		// ships it, is gzip'ed.
		format, name, modules = "arm64-efi", "BOOTAA64.EFI", []string{"gzio"}
		d, err := qemu.GRUBDir(ctx, arch)
		if err != nil {
			t.Fatal(err)
		}
		grubDir = []string{"-d", d}
	}
	efi := filepath.Join(dir, name)
	esp := filepath.Join(dir, "esp.img")
	mkimage := append(append([]string{"grub-mkimage", "-O", format, "-p", "/EFI/BOOT", "-c", cfg, "-o", efi}, grubDir...),
		"normal", "configfile", "search", "search_fs_file", "iso9660", "fat", "part_msdos", "part_gpt", "linux", "echo", "test")
	for _, c := range [][]string{
		append(mkimage, modules...),
		{"mkfs.fat", "-C", esp, "8192"},
		{"mmd", "-i", esp, "::/EFI", "::/EFI/BOOT"},
		{"mcopy", "-i", esp, efi, "::/EFI/BOOT/" + name},
	} {
		if out, err := exec.CommandContext(ctx, c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("ESP image: %s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	return esp
}

// isoBoot is what Ironic put into the ISO vm booted from.
type isoBoot struct {
	label   string // the volume ID
	cmdline string // the ramdisk's kernel parameters in the boot loader's configuration
	files   string // the ISO's file list
	iso     string
	// params are the parameters Ironic gave the ramdisk: the kernel
	// line, or parameters.txt on the USB stick of a prebuilt ISO's boot.
	params string
}

// checkISOBoot checks that vm booted the ISO Ironic built and the BMC
// downloaded from Ironic's HTTP root (no kernel handed to QEMU), and
// returns what is in it.
func (r *redfishNode) checkISOBoot(vm *qemu.VM) isoBoot {
	t := r.t
	t.Helper()
	ib := isoBoot{iso: vm.Machine.ISO}
	if ib.iso == "" || slices.Contains(vm.Cmdline, "-kernel") {
		t.Fatalf("the ramdisk boot was not from the virtual CD: %s", qemu.ShellQuote(vm.Cmdline))
	}
	if r.m.ISOOnUSB && !slices.ContainsFunc(vm.Cmdline, func(a string) bool { return strings.HasPrefix(a, "usb-storage,id=usbcd,") }) {
		t.Fatalf("the virtual CD is not on USB: %s", qemu.ShellQuote(vm.Cmdline))
	}
	if got := r.bed.served("/redfish/boot-" + r.node.UUID); len(got) == 0 {
		t.Errorf("the BMC did not fetch the ISO from Ironic's HTTP root (requests: %s)", strings.Join(r.bed.served("/redfish"), ", "))
	}
	isoinfo := func(args ...string) string {
		out, err := exec.CommandContext(r.ctx, "isoinfo", append([]string{"-i", ib.iso}, args...)...).Output()
		if err != nil {
			t.Fatalf("isoinfo %s on %s: %v", strings.Join(args, " "), ib.iso, err)
		}
		return string(out)
	}
	for l := range strings.Lines(isoinfo("-d")) {
		if v, ok := strings.CutPrefix(l, "Volume id: "); ok {
			ib.label = strings.TrimSpace(v)
		}
	}
	ib.files = isoinfo("-R", "-f")
	cfg, keyword := "/isolinux/isolinux.cfg", "append"
	if r.m.Firmware == qemu.UEFI {
		cfg, keyword = "/EFI/BOOT/grub.cfg", "linuxefi"
	}
	if r.secureBoot {
		// linuxGrubTemplate's entry, where Debian's signed GRUB reads it.
		cfg, keyword = "/"+ramdiskpkg.GrubConfigPath, "linux"
	}
	if r.m.Arch == qemu.Arm64 {
		// arm64ProvisioningNetwork's template.
		keyword = "linux"
	}
	if r.prebuilt {
		// ramdisk.ISO's GRUB entry: "linux /boot/vmlinuz PARAMS".
		cfg, keyword = "/boot/grub/grub.cfg", "linux"
	}
	for l := range strings.Lines(isoinfo("-R", "-x", cfg)) {
		if f := strings.Fields(l); len(f) > 1 && f[0] == keyword {
			ib.cmdline = strings.Join(f[1:], " ")
		}
	}
	if ib.cmdline == "" {
		t.Fatalf("no %s line in the ISO's %s", keyword, cfg)
	}
	ib.params = ib.cmdline
	if r.prebuilt {
		ib.params = r.checkStick(vm)
		if !slices.Contains(strings.Fields(ib.cmdline), "boot_method=vmedia") || strings.Contains(ib.cmdline, "ipa-") {
			t.Errorf("the prebuilt ISO's kernel line: %s; want boot_method=vmedia and no ipa-* parameter", ib.cmdline)
		}
		return ib
	}
	// Ironic's isolinux/grub template, its kernel_append_params
	// ([redfish]) and what virtual media always adds.
	for _, w := range append(strings.Fields(r.kernelParams), "boot_method=vmedia", "ipa-debug=1") {
		if !slices.Contains(strings.Fields(ib.cmdline), w) {
			t.Errorf("the ISO's kernel line lacks %q: %s", w, ib.cmdline)
		}
	}
	if _, ok := vm.Find(logtext.Msg(vmedia.EventNoParameters)); !ok {
		t.Error("the init did not say it found no virtual media parameters device")
	}
	return ib
}

// checkStick checks that vm booted with the USB stick Ironic inserted
// (config_via_removable) and that the init merged its parameters.txt, and
// returns that file.
func (r *redfishNode) checkStick(vm *qemu.VM) string {
	t := r.t
	t.Helper()
	if vm.Machine.USBStick == "" || !slices.Contains(vm.Cmdline, "usb-storage,bus=xhci.0,drive=usbstick,removable=on") {
		t.Fatalf("the ramdisk boot had no USB stick: %s", qemu.ShellQuote(vm.Cmdline))
	}
	out, err := exec.CommandContext(r.ctx, "mtype", "-i", vm.Machine.USBStick, "::parameters.txt").Output()
	if err != nil {
		t.Fatalf("parameters.txt on the USB stick %s: %v", vm.Machine.USBStick, err)
	}
	if l, ok := vm.Find(logtext.Msg(vmedia.EventParameters) + " "); !ok || !strings.Contains(l.Text, "device=/dev/sd") || !strings.Contains(l.Text, "ipa-api-url") && !strings.Contains(l.Text, "ipa-inspection-callback-url") {
		t.Errorf("the init did not merge the stick's parameters: %q", l.Text)
	} else {
		t.Logf("%s", l.Text)
		reportSeconds(t, l.At, "vmedia_parameters_s")
	}
	return string(out)
}

// checkTLSConfig checks that Ironic ([agent]api_ca_file) put its CA and
// the agent's configuration naming it on the ISO, that the init copied
// them into /etc, and that the agent verified Ironic with that CA.
func (r *redfishNode) checkTLSConfig(what string, vm *qemu.VM, ib isoBoot) {
	t := r.t
	t.Helper()
	for _, f := range []string{"/etc/ironic-python-agent/ironic.crt", "/etc/ironic-python-agent.d/ironic-tls.conf"} {
		if !strings.Contains(ib.files, f) {
			t.Errorf("%s: the ISO lacks %s: %s", what, f, ib.files)
		}
	}
	for _, d := range []string{"device=/dev/sr0 from=/etc/ironic-python-agent to=/etc/ironic-python-agent files=ironic.crt",
		"device=/dev/sr0 from=/etc/ironic-python-agent.d to=/etc/ironic-python-agent.d files=ironic-tls.conf"} {
		i := slices.IndexFunc(vm.Lines(), func(l qemu.Line) bool {
			return strings.Contains(l.Text, logtext.Msg(vmedia.EventConfigCopied)+" ") && strings.Contains(l.Text, d)
		})
		if i < 0 {
			t.Errorf("%s: the init did not copy %s", what, d)
		} else {
			reportSeconds(t, vm.Lines()[i].At, what, "vmedia_config_s")
		}
	}
	if strings.Contains(ib.params, "ipa-insecure") {
		t.Errorf("%s: Ironic asked for no certificate check: %s", what, ib.params)
	}
	if l, ok := vm.Find("option=cafile "); !ok || !strings.Contains(l.Text, "/etc/ironic-python-agent.d/ironic-tls.conf") {
		t.Errorf("%s: the agent did not take cafile from the copied ironic-tls.conf: %q", what, l.Text)
	}
	if l, ok := vm.Find("option=insecure "); ok {
		t.Errorf("%s: the agent's insecure is not its default: %q", what, l.Text)
	}
}

// kernelParam is the value of name on cmdline, "" if absent.
func kernelParam(cmdline, name string) string {
	for f := range strings.FieldsSeq(cmdline) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return ""
}

// TestVMRedfishVirtualMediaBIOS is the lifecycle Ironic drives through a
// Redfish BMC under SeaBIOS: a node of the redfish hardware type with the
// redfish-virtual-media boot interface. For each operation Ironic builds
// an ISO of the deploy kernel and ramdisk with its kernel parameters
// (ISOLINUX), publishes it in its HTTP root, has the BMC insert it
// (InsertMedia: the BMC downloads it), sets the boot override to Cd once
// and powers the machine on: inspection, cleaning and a deploy, after
// which it ejects the CD, sets the override to Hdd for good and powers the
// deployed disk on. No test code starts QEMU.
// TestVMRedfishDHCPLessBIOS, which runs by default, goes the same way; this
// one adds only the DHCP that every other VM test has.
func TestVMRedfishVirtualMediaBIOS(t *testing.T) {
	slowScenario(t)
	redfishLifecycle(t, "bios", 0, redfishCase{})
}

// TestVMRedfishVirtualMediaUEFI is the same under OVMF: Ironic's UEFI ISO
// boots GRUB from the ESP the node's driver_info names (redfishESP),
// which reads the grub.cfg Ironic wrote.
func TestVMRedfishVirtualMediaUEFI(t *testing.T) {
	slowScenario(t)
	redfishLifecycle(t, "uefi", 1, redfishCase{})
}

// TestVMRedfishDHCPLessBIOS is the DHCP-less boot through Ironic: the
// node has network_data (a static address on its NIC), Ironic writes it
// into the ISO as openstack/latest/network_data.json and labels the ISO
// config-2 (Ironic 21.4 makes the virtual-media ISO the config drive), and
// dnsmasq ignores the machine. The init finds the label on the CD, sets
// the static address, and inspection, cleaning and the deploy run over it.
func TestVMRedfishDHCPLessBIOS(t *testing.T) {
	redfishLifecycle(t, "bios", redfishDHCPLess, redfishCase{dhcpLess: true})
}

// TestVMRedfishTLSBIOS is a virtual-media lifecycle against an Ironic
// whose API is HTTPS only, with a CA made for the test that no ramdisk
// carries: Ironic's [agent]api_ca_file puts the CA and an
// ironic-python-agent.d file naming it (cafile) on each ISO it builds, the
// init copies both into /etc as IPA does, and the agent verifies Ironic's
// certificate with it through lookup, cleaning and the deploy, with no
// ipa-insecure. The provisioning network and its Ironic are the test's own.
func TestVMRedfishTLSBIOS(t *testing.T) {
	seriesIndependent(t)
	redfishLifecycle(t, "bios", redfishTLSNode, redfishCase{tls: true})
}

// TestVMRedfishRemovableConfigBIOS boots the project's prebuilt ISO (make
// iso, with no ipa-* parameter) as the node's deploy_iso, with
// config_via_removable: Ironic writes the ramdisk's parameters (API URL,
// token, inspection callback) into parameters.txt on a vfat image labelled
// ir-vfd-dev and inserts it in the BMC's virtual USB stick, which the BMC
// attaches as a removable USB disk on xHCI; the init finds it, merges the
// parameters, and inspection, cleaning and the deploy run on them. Slow
// (E2E_VM_SLOW): a whole lifecycle, whose init code TestVMRedfishTLSBIOS
// runs too.
func TestVMRedfishRemovableConfigBIOS(t *testing.T) {
	slowScenario(t)
	redfishLifecycle(t, "bios", redfishRemovableNode, redfishCase{removable: true})
}

// TestVMRedfishUSBCDUEFI is the DHCP-less virtual-media boot as servers'
// BMCs present the medium: Ironic's ISO, its config drive with the
// node's network_data, in the BMC's virtual CD, which is a USB CD-ROM on
// xHCI (iDRAC and iLO present virtual media as USB devices). OVMF boots
// GRUB from the USB device; the init finds the CD through xhci_hcd,
// usb-storage and sr_mod, sets the static address, and inspection runs
// over it. The later boots of a lifecycle take the same ISO the same way.
// Slow (E2E_VM_SLOW).
func TestVMRedfishUSBCDUEFI(t *testing.T) {
	slowScenario(t)
	redfishLifecycle(t, "uefi", redfishUSBCDNode, redfishCase{dhcpLess: true, usbCD: true, inspectionOnly: true})
}

// tlsProvisioningNetwork is a provisioning network of t's own whose Ironic
// serves HTTPS with a CA of its own (ironic.Config.TLS).
func tlsProvisioningNetwork(t *testing.T) *pxeBed {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	bed, err := startPXEBed(ctx, filepath.Join(t.TempDir(), "provisioning"), "pxetls", true)
	if err != nil {
		t.Fatalf("TLS provisioning network: %v", err)
	}
	reportSeconds(t, time.Since(start), "tls_bed_up_s")
	bed.closeAtEnd(t)
	return bed
}

// redfishStaticAddress is the DHCP-less machine's address.
const redfishStaticAddress = "10.99.0.62"

func redfishLifecycle(t *testing.T, fw string, n int, c redfishCase) {
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()
	dhcpLess := c.dhcpLess
	if dhcpLess {
		c.networkData = map[string]any{
			"links": []any{map[string]any{"id": "prov0", "type": "phy", "ethernet_mac_address": redfishMAC(n), "mtu": 1500}},
			"networks": []any{map[string]any{"id": "prov-ipv4", "network_id": "provisioning", "type": "ipv4", "link": "prov0",
				"ip_address": redfishStaticAddress, "netmask": "255.255.255.0", "routes": []any{}}},
			"services": []any{},
		}
	}
	r := newRedfishNode(t, ctx, fw, n, c)
	s, m, disk := r.s, r.m, r.disk
	writeAt(t, disk, 0, pattern(64<<10, 0xa5))
	ironicURL := "http://" + pxeNet.Addr().String() + ":6385"
	if c.tls {
		ironicURL = "https://" + pxeNet.Addr().String() + ":6385"
	}

	// checkNetwork checks how the boot got its address; lookup: the agent
	// knew Ironic's URL, so its callback URL is the address's.
	checkNetwork := func(what string, vm *qemu.VM, ib isoBoot, lookup bool) {
		t.Helper()
		if c.tls {
			r.checkTLSConfig(what, vm, ib)
		}
		if !dhcpLess {
			if ib.label != "VMEDIA_BOOT_ISO" && !c.removable {
				t.Errorf("%s: ISO volume id %q, want Ironic's VMEDIA_BOOT_ISO", what, ib.label)
			}
			if lookup {
				checkAgentAddress(t, vm)
			}
			return
		}
		if ib.label != "config-2" || !strings.Contains(ib.files, "/openstack/latest/network_data.json") {
			t.Errorf("%s: ISO volume id %q, files %q; want config-2 with openstack/latest/network_data.json", what, ib.label, ib.files)
		}
		out, err := exec.CommandContext(ctx, "isoinfo", "-i", ib.iso, "-R", "-x", "/openstack/latest/network_data.json").Output()
		var got map[string]any
		if err != nil || json.Unmarshal(out, &got) != nil {
			t.Errorf("%s: network_data.json in the ISO: %v: %q", what, err, out)
		} else if a, _ := json.Marshal(got); !bytes.Contains(a, []byte(redfishStaticAddress)) {
			t.Errorf("%s: the ISO's network_data.json is not the node's: %s", what, a)
		}
		if l, ok := vm.Find(logtext.Msg(netup.EventNetworkData) + " "); !ok || !strings.Contains(l.Text, "device=/dev/sr0 type=iso9660") {
			t.Errorf("%s: the init did not read network data from the virtual CD: %q", what, l.Text)
		} else {
			t.Logf("%s: %s", what, l.Text)
			reportSeconds(t, l.At, what, "network_data_s")
		}
		if l, ok := vm.Find(logtext.Msg(netup.EventStaticAddress) + " "); !ok || !strings.Contains(l.Text, " address="+redfishStaticAddress+"/24") {
			t.Errorf("%s: the init did not set the static address: %q", what, l.Text)
		}
		if l, ok := vm.Find(logtext.Msg(agent.EventAPIListening)); lookup && (!ok || !strings.Contains(l.Text, "://"+redfishStaticAddress+":")) {
			t.Errorf("%s: the agent does not call back on the static address: %q", what, l.Text)
		}
		for _, l := range vm.Lines() {
			if strings.Contains(l.Text, logtext.Msg(netup.EventDHCPLease)) {
				t.Errorf("%s: the init ran DHCP on a DHCP-less boot: %s", what, l.Text)
			}
		}
		if strings.Contains(strings.ToLower(r.bed.net.DHCPLog()), strings.ToLower(r.mac)+" ignored") {
			t.Errorf("%s: the machine asked dnsmasq for a lease", what)
		}
	}

	// Inspection: Ironic's inspector interface has the boot interface
	// build the ISO with the inspection callback and powers on.
	vm := r.l.Inspect(10*time.Minute).report(t, "inspection")
	r.l.WaitOff("inspection")
	ib := r.checkISOBoot(vm)
	checkParam(t, ib.params, "ipa-inspection-callback-url", "http://"+pxeNet.Addr().String()+":5050/v1/continue")
	checkParsed(t, vm, "inspection_callback_url", "inspection_collectors", "debug")
	checkNetwork("inspection", vm, ib, false)
	data := s.inspectionData(t, ctx, r.node.UUID, time.Minute)
	inv, _ := data["inventory"].(map[string]any)
	if c.removable {
		// The stick is a disk of the inventory, as in IPA's: Ironic's
		// vfat image (100 KiB in 21.4, 1440 KiB later). The machine's
		// own disks are checked without it.
		disks, _ := inv["disks"].([]any)
		kept := slices.DeleteFunc(slices.Clone(disks), func(d any) bool {
			dm, _ := d.(map[string]any)
			size, _ := dm["size"].(float64)
			return size > 0 && size <= 1440<<10
		})
		if len(kept) != len(disks)-1 {
			t.Errorf("inventory: the USB stick (Ironic's vfat image) is not among the disks: %v", disks)
		}
		inv["disks"] = kept
	}
	checkInventory(t, inv, m)
	ifaces, _ := inv["interfaces"].([]any)
	for _, i := range ifaces {
		if i, _ := i.(map[string]any); i["mac_address"] == r.mac {
			if a, _ := i["ipv4_address"].(string); (dhcpLess && a != redfishStaticAddress) || !strings.HasPrefix(a, "10.99.0.") {
				t.Errorf("inventory: %s has IPv4 address %q, want one on the provisioning network (DHCP-less: %s)", r.mac, a, redfishStaticAddress)
			}
		}
	}
	// No BMC inside this machine (no KCS): what the agent reports.
	t.Logf("inventory bmc_address %v, bmc_v6address %v (the machine has no in-band BMC interface)", inv["bmc_address"], inv["bmc_v6address"])
	if c.inspectionOnly {
		t.Logf("BMC events: %s", strings.Join(r.bmc.Events(), "; "))
		reportSeconds(t, time.Since(testStart), "whole_test_s")
		return
	}

	// Cleaning: a new ISO with the API URL and the token Ironic made
	// before the boot (virtual media's pregenerated token).
	vm = r.l.Provide(10*time.Minute).report(t, "cleaning")
	r.l.WaitOff("cleaning")
	ib = r.checkISOBoot(vm)
	checkParam(t, ib.params, "ipa-api-url", ironicURL)
	if tok := kernelParam(ib.params, "ipa-agent-token"); len(tok) < 32 {
		t.Errorf("cleaning ISO: ipa-agent-token %q, want Ironic's pregenerated token", tok)
	}
	// Ironic 21.4 writes ipa-global-request-id into PXE configurations
	// only (pxe_utils), not into the ISOs.
	checkParsed(t, vm, "api_url", "agent_token")
	if _, ok := vm.Find(logtext.Msg(agent.EventMaskedTokenKept)); !ok {
		t.Error("the agent did not keep the token from the ISO at lookup")
	}
	checkNetwork("cleaning", vm, ib, true)
	if b := readAt(t, disk, 0, 64<<10); !bytes.Equal(b, make([]byte, 64<<10)) {
		t.Error("cleaning did not erase the start of the disk")
	}

	// Deploy: the image onto the disk, then Ironic ejects the CD, sets the
	// override to Hdd (Continuous) and powers the disk on.
	img := setDeployImage(t, ctx, s, r.bed, r.node.UUID, fw, m.Dir, fmt.Sprintf("redfish-image-%s-%d.raw", fw, n))
	bootsBefore := r.bmc.Boots()
	vm = r.l.Deploy(10*time.Minute).report(t, "deploy")
	ib = r.checkISOBoot(vm)
	checkNetwork("deploy", vm, ib, true)
	if !r.bmc.On() || r.bmc.Boots() != bootsBefore+2 {
		t.Errorf("deploy: %d power-ons, machine on %v; want 2 (the ISO, then the disk), on", r.bmc.Boots()-bootsBefore, r.bmc.On())
	}
	if target, enabled, _ := r.bmc.BootOverride(); target != bmcsim.RedfishBootHdd || enabled != "Continuous" {
		t.Errorf("boot override after the deploy: %s %s, want Hdd Continuous", target, enabled)
	}
	if image, _ := r.bmc.Media(bmcsim.RedfishMediaCd); image != "" {
		t.Errorf("the virtual CD still holds %s after the deploy", image)
	}
	diskVM := r.bmc.VM()
	if diskVM.Machine.ISO != "" || slices.Contains(diskVM.Cmdline, "-kernel") {
		t.Errorf("the boot after the deploy was not from the disk: %s", qemu.ShellQuote(diskVM.Cmdline))
	}
	checkDeployedDisk(t, ctx, diskVM, disk, img, fw)
	if st, err := os.Stat(ib.iso); err == nil {
		t.Logf("ISO Ironic built: volume id %s; kernel line: %s", ib.label, ib.cmdline)
		reportValue(t, float64(st.Size())/(1<<20), "MiB", "iso_size")
	}
	t.Logf("BMC events: %s", strings.Join(r.bmc.Events(), "; "))
	t.Logf("%d power-ons", r.bmc.Boots())
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}
