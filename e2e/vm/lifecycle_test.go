package vm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/testbed/bmcsim"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
	"github.com/ironic-go/ironic-agent/rescue"
)

// TestVMLifecycleBIOS is a machine's whole life with Ironic driving it
// under SeaBIOS: a node of the ipmi hardware type behind ipmi_sim, with
// the ipxe boot interface, on the provisioning network (bridge, dnsmasq,
// Ironic's HTTP root) in a namespace. The ramdisk is a release directory
// laid out with `make release`'s names (internal/testbed/releasedir) and
// served over HTTP: the node's deploy_kernel and deploy_ramdisk are its
// versioned files' URLs, rescue_kernel and rescue_ramdisk its IPA-layout
// copies' (dib/files/ipa-goagent-master.*), and Ironic fetches them itself;
// every boot's files must have the digests of the release's .sha256
// files. Enroll, inspect, clean, deploy
// internal/testbed/osimage's whole-disk image (qcow2) with a config drive, the
// deployed OS booting from the disk and printing the config drive's
// hostname and user-data, rescue (Ironic network-boots the agent ramdisk;
// logins as rescue over SSH and on the serial console), unrescue and the
// deployed OS again. No test code starts QEMU: every boot is a power-on
// Ironic sends to the BMC, and every ramdisk boot comes from the network
// through Ironic's iPXE configuration.
func TestVMLifecycleBIOS(t *testing.T) { lifecycleScenario(t, "bios", 0) }

// TestVMLifecycleUEFI is TestVMLifecycleBIOS under OVMF: the firmware's
// own PXE gets snponly.efi over TFTP from dnsmasq, which as iPXE comes
// back for boot.ipxe; the raw GPT image's GRUB is found through the NVRAM
// entry the agent writes from the image's BOOTX64.CSV.
func TestVMLifecycleUEFI(t *testing.T) {
	slowScenario(t)
	lifecycleScenario(t, "uefi", 1)
}

// lifecycleScenario runs the scenario for firmware fw on pxeNode n.
func lifecycleScenario(t *testing.T, fw string, n int) {
	testStart := time.Now()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("SKIPPED: needs ssh (Debian package openssh-client; in test.sh)")
	}
	if m := osimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (in test.sh)", m)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	p := newPXENode(t, ctx, fw, n, "ipxe")
	bed, s, m, bmc, node, macs, disk := p.bed, p.s, p.m, p.bmc, p.node, p.macs, p.disk
	// Something for cleaning's metadata erase to remove.
	writeAt(t, disk, 0, pattern(64<<10, 0xa5))
	raw, served, format := lifecycleImage(t, ctx, fw, m.Dir)
	// The ramdisk comes from a release directory served over HTTP, as an
	// operator serves a downloaded release: Ironic fetches the versioned
	// files as deploy_kernel and deploy_ramdisk into its image cache and
	// stages them for iPXE. The agent rescue interface boots the
	// IPA-layout copies (dib/files/ipa-goagent-master.*, Bifrost's and
	// OpenStack-Ansible's names) as rescue_kernel and rescue_ramdisk.
	// Neither series' Ironic takes a checksum for these: it checks a HEAD
	// (Content-Length, Last-Modified) and downloads; the test compares
	// what the machine got with the release's .sha256 files.
	rel := serveRelease(t, bed, ramdisk(t))
	if err := nodes.Update(ctx, s.ironic.Service, node.UUID, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/rescue_interface", Value: "agent"},
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/driver_info/deploy_kernel", Value: rel.url(rel.Kernel())},
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/driver_info/deploy_ramdisk", Value: rel.url(rel.Initramfs())},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/rescue_kernel", Value: rel.url(rel.IPAKernel())},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/rescue_ramdisk", Value: rel.url(rel.IPAInitramfs())},
	}).Err; err != nil {
		t.Fatal(err)
	}
	checkDeployRamdisk := func() {
		t.Helper()
		rel.checkStaged(t, bed, node.UUID, "deploy_kernel", rel.Kernel())
		rel.checkStaged(t, bed, node.UUID, "deploy_ramdisk", rel.Initramfs())
	}
	var times []string
	mark := func(what string, since time.Time) {
		times = append(times, what+" "+time.Since(since).Round(100*time.Millisecond).String())
		reportSeconds(t, time.Since(since), what+"_s")
	}

	// Inspection: Ironic prepares the ipxe boot with the inspection
	// callback and powers the machine on; the agent reads the BMC over
	// KCS.
	step := time.Now()
	vm := p.l.Inspect(10*time.Minute).report(t, "inspection")
	p.l.WaitOff("inspection")
	mark("inspection", step)
	data := s.inspectionData(t, ctx, node.UUID, time.Minute)
	inv, _ := data["inventory"].(map[string]any)
	checkInventory(t, inv, m)
	stored, err := s.ironic.GetNode(ctx, node.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if used := stored.DriverInfo["ipmi_address"]; inv["bmc_address"] != used || used != m.BMC.LANAddress {
		t.Errorf("inventory bmc_address = %v, Ironic's ipmi_address = %v, the BMC's %s: want them equal", inv["bmc_address"], used, m.BMC.LANAddress)
	}
	if got := inv["bmc_mac"]; got != m.BMC.LANMAC {
		t.Errorf("inventory bmc_mac = %v, want the BMC's %s", got, m.BMC.LANMAC)
	}
	// iPXE's ${mac}: the MAC as it is, which IPA keeps raw.
	if got := data["boot_interface"]; got != macs[0] {
		t.Errorf("inspection boot_interface = %v, want BOOTIF %s", got, macs[0])
	}
	if got := data["pci_devices"]; got == nil {
		t.Errorf("no pci_devices in the inspection data: [inspector]extra_kernel_params' collectors did not reach the agent (keys %v)", keys(data))
	}
	cmdline := checkNetBoot(t, vm, bed, node.UUID, macs[0], fw)
	checkParam(t, cmdline, "ipa-inspection-callback-url", p.bed.inspectionCallback())
	checkParsed(t, vm, "inspection_callback_url", "inspection_collectors", "debug")
	checkDeployRamdisk()

	// Cleaning: the ramdisk looks the node up at ipa-api-url, heartbeats
	// with the global request id, and runs erase_devices_metadata.
	step = time.Now()
	vm = p.l.Provide(10*time.Minute).report(t, "cleaning")
	p.l.WaitOff("cleaning")
	mark("cleaning", step)
	cmdline = checkNetBoot(t, vm, bed, node.UUID, macs[0], fw)
	checkParam(t, cmdline, "ipa-api-url", "http://"+pxeNet.Addr().String()+":6385")
	checkParsed(t, vm, "api_url", "global_request_id")
	if b := readAt(t, disk, 0, 64<<10); !bytes.Equal(b, make([]byte, 64<<10)) {
		t.Error("cleaning did not erase the start of the vblk disk")
	}
	checkRequestID(t, bed, cmdline)
	checkBootIF(t, vm)
	checkAgentAddress(t, vm)
	checkDeployRamdisk()

	// Deploy with a config drive; Ironic sets the boot device to disk
	// and powers the machine on, and the deployed OS reads the drive.
	img := osBootImage{format: format, hostname: "lifecycle-" + fw, userData: "#cloud-config\nhostname: lifecycle-" + fw + "\n"}
	step = time.Now()
	vm, osVM := deployOS(t, ctx, osDeploy{s: s, node: node.UUID, bmc: bmc, l: p.l, firmware: fw,
		url: bed.serveImage(filepath.Base(served), served), path: served, serial: pxeTarget, img: img})
	mark("deploy and the OS's boot", step)
	checkNetBoot(t, vm, bed, node.UUID, macs[0], fw)
	checkDeployRamdisk()
	checkImage(t, disk, raw, fw)
	if l, ok := osVM.Find("BdsDxe: loading"); ok {
		t.Logf("OVMF: %s", l.Text[strings.Index(l.Text, "BdsDxe"):])
	}

	// Rescue: Ironic network-boots the ramdisk, whose agent takes the
	// hashed password in finalize_rescue; then logins as rescue.
	step = time.Now()
	vm = p.l.Rescue(8*time.Minute, rescuePassword).report(t, "rescue")
	lctx, lcancel := context.WithTimeout(ctx, time.Minute)
	_, err = vm.WaitFor(lctx, logtext.Msg(rescue.EventSSHListening))
	lcancel()
	if err != nil {
		t.Fatal(err)
	}
	mark("rescue", step)
	checkRescueBoot(t, vm, bed, node.UUID)
	rel.checkStaged(t, bed, node.UUID, "rescue_kernel", rel.IPAKernel())
	rel.checkStaged(t, bed, node.UUID, "rescue_ramdisk", rel.IPAInitramfs())
	t.Logf("requests for the release: %s", strings.Join(bed.served("/releases/"), ", "))
	guest := guestAddress(t, vm)

	step = time.Now()
	out, err := rescueSSH(t, ctx, bed.net.Name, guest, rescuePassword, nil, "echo rescued as $USER on $(cat /proc/sys/kernel/hostname); ls /dev/ipmi0; exit 3")
	if code := exitCode(err); code != 3 || !strings.Contains(out, "rescued as rescue on") || !strings.Contains(out, "/dev/ipmi0") {
		t.Errorf("ssh exec: exit status %d (%v), output:\n%s", code, err, out)
	}
	out, err = rescueSSH(t, ctx, bed.net.Name, guest, rescuePassword, []string{"-tt"}, "tty")
	if exitCode(err) != 0 || !strings.Contains(out, "/dev/pts/") {
		t.Errorf("ssh with a terminal: %v, output:\n%s", err, out)
	}
	out, err = rescueSSH(t, ctx, bed.net.Name, guest, "not the password", nil, "echo in")
	if err == nil || strings.Contains(out, "in\n") || !strings.Contains(out, "Permission denied") {
		t.Errorf("ssh with a wrong password: %v, output:\n%s", err, out)
	}
	mark("three ssh logins", step)
	step = time.Now()
	consoleLogin(t, ctx, vm, "not the password", "Login incorrect")
	consoleLogin(t, ctx, vm, rescuePassword, "SERIAL-42 as rescue")
	mark("two console logins", step)

	// Unrescue: Ironic powers the machine off, sets the boot device to
	// disk and powers it on; the deployed OS boots again and reads the
	// same config drive.
	step = time.Now()
	boots := bmc.Boots()
	p.l.Unrescue(5*time.Minute).report(t, "unrescue")
	osVM = diskBoot(t, ctx, bmc, boots)
	waitOSReport(t, ctx, bmc, osVM, img)
	mark("unrescue and the OS's boot", step)

	// Ironic held the power throughout: every power-on came over IPMI.
	for _, e := range bmc.Events() {
		if strings.HasPrefix(e, "power on") && !strings.HasPrefix(e, "power on by IPMI") {
			t.Errorf("a power-on Ironic did not send: %s", e)
		}
	}
	t.Logf("BMC events: %s", strings.Join(bmc.Events(), "; "))
	t.Logf("%s: %s; %d power-ons", fw, strings.Join(times, ", "), bmc.Boots())
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}

// lifecycleImage builds internal/testbed/osimage's whole-disk image for fw in
// dir and returns the raw image, the file to deploy and its format: under
// SeaBIOS the MBR image as qcow2 (the agent converts it while writing),
// under OVMF the raw GPT image.
func lifecycleImage(t *testing.T, ctx context.Context, fw, dir string) (raw, served, format string) {
	t.Helper()
	start := time.Now()
	o, err := osimage.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	raw = filepath.Join(dir, "os-"+fw+".raw")
	if fw == "bios" {
		err = o.BIOSDisk(ctx, dir, raw)
	} else {
		err = o.UEFIDisk(ctx, dir, raw)
	}
	if err != nil {
		t.Fatal(err)
	}
	served, format = raw, "raw"
	if fw == "bios" {
		served, format = filepath.Join(dir, "os-bios.qcow2"), "qcow2"
		if err := osimage.QCOW2(ctx, raw, served); err != nil {
			t.Fatal(err)
		}
	}
	reportSeconds(t, time.Since(start), "os_image_build_s")
	return raw, served, format
}

// checkImage checks that disk holds the raw image but for what the
// agent's config drive changed: the MBR's partition table (a second entry)
// under SeaBIOS; under OVMF the GPT, whose headers and entries the agent
// rewrites and whose backup it moves to the end of the disk, so from the
// first partition to the image's own backup.
func checkImage(t *testing.T, disk, raw, fw string) {
	t.Helper()
	img, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	ranges := [][2]int{{0, 446}, {512, len(img)}}
	if fw == "uefi" {
		ranges = [][2]int{{1 << 20, len(img) - 1<<20}}
	}
	for _, r := range ranges {
		if got := readAt(t, disk, int64(r[0]), r[1]-r[0]); !bytes.Equal(got, img[r[0]:r[1]]) {
			t.Errorf("the disk %s does not hold the image's bytes %d-%d", pxeTarget, r[0], r[1])
		}
	}
}

// checkRescueBoot checks that vm is a network boot of the rescue ramdisk
// Ironic staged: its kernel and initramfs fetched from the node's
// directory, and the kernel line of Ironic's iPXE template for rescue.
func checkRescueBoot(t *testing.T, vm *qemu.VM, bed *pxeBed, nodeUUID string) {
	t.Helper()
	if !vm.Machine.NetBoot || slices.Contains(vm.Cmdline, "-kernel") {
		t.Errorf("the rescue boot was not a network boot: %s", qemu.ShellQuote(vm.Cmdline))
	}
	for _, f := range []string{"rescue_kernel", "rescue_ramdisk"} {
		if len(bed.served("/"+nodeUUID+"/"+f)) == 0 {
			t.Errorf("the rescue boot did not fetch http://%s/%s/%s", pxeHTTP, nodeUUID, f)
		}
	}
	cmdline := bed.lastKernelLine()
	for _, w := range []string{"BOOTIF=${mac}", "initrd=rescue_ramdisk", "ipa-api-url=http://" + pxeNet.Addr().String() + ":6385"} {
		if !slices.Contains(strings.Fields(cmdline), w) {
			t.Errorf("kernel line of Ironic's rescue iPXE config lacks %q: %s", w, cmdline)
		}
	}
}

// guestAddress is the provisioning network address the agent in vm
// called back on (its "agent API listening" line's callback_url).
func guestAddress(t *testing.T, vm *qemu.VM) string {
	t.Helper()
	l, ok := vm.Find(logtext.Msg(agent.EventAPIListening))
	_, url, found := strings.Cut(l.Text, "callback_url=https://")
	host, _, _ := strings.Cut(url, ":")
	if !ok || !found || !strings.HasPrefix(host, "10.99.0.") {
		t.Fatalf("no provisioning network address in the agent's callback URL: %q", l.Text)
	}
	return host
}

// diskBoot waits for the first power-on after the first `after` ones that
// boots the disk (neither the network nor a kernel handed to QEMU) and
// returns its VM.
func diskBoot(t *testing.T, ctx context.Context, bmc *bmcsim.IPMISim, after int) *qemu.VM {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		for i := after + 1; i <= bmc.Boots(); i++ {
			if vm := bmc.VMOfBoot(i); !vm.Machine.NetBoot && vm.Machine.Kernel == "" {
				return vm
			}
		}
		if _, err := bmc.WaitBoot(ctx, bmc.Boots()); err != nil {
			t.Fatalf("no disk boot after power-on %d (BMC boot device %q): %v", after, bmc.BootDevice(), err)
		}
	}
}
