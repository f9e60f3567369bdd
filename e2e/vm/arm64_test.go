package vm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/testbed/bmcsim"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/metric"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// uefiShellFile is the file GUID of EDK II's UEFI Shell, which AAVMF
// lists as a boot entry of its firmware volume.
const uefiShellFile = "7C04A583-9E3E-4F1C-AD65-E05268D0B4D1"

// needArm64 skips t unless an arm64 machine can run here.
func needArm64(t *testing.T) {
	t.Helper()
	for _, p := range []string{"/usr/bin/qemu-system-aarch64", qemu.AAVMFCode, qemu.AAVMFVars} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("SKIPPED: needs qemu-system-arm and qemu-efi-aarch64 (in test.sh): %v", err)
		}
	}
}

// arm64Ramdisk builds the arm64 ramdisk (the agent cross-built, Debian's
// arm64 kernel, firmware and programs), from the ramdisk cache when it
// holds one for these sources.
func arm64Ramdisk(t *testing.T, ctx context.Context) *qemu.Ramdisk {
	t.Helper()
	needQEMU(t)
	needArm64(t)
	start := time.Now()
	rd, err := qemu.BuildRamdiskArch(ctx, qemu.Arm64)
	if err != nil {
		t.Fatalf("build the arm64 ramdisk: %v", err)
	}
	t.Logf("arm64 ramdisk (kernel %s, cached %v) in %s: %s", rd.KernelPackage, rd.Cached, time.Since(start).Round(time.Second), sizes(rd))
	return rd
}

// arm64ESPName is the name the arm64 ESP (redfishESP) is served under.
const arm64ESPName = "redfish-esp-arm64.img"

// arm64ProvisioningNetwork is a provisioning network of t's own whose
// Ironic writes its UEFI ISOs' GRUB configuration with linux and initrd
// (linuxGrubTemplate): Ironic 21.4's own template says linuxefi and
// initrdefi, which GRUB for arm64 does not have, so an operator booting
// arm64 machines through its virtual media sets
// [DEFAULT]grub_config_template as this bed does. The ESP is the node's
// driver_info bootloader, also [conductor]bootloader here.
func arm64ProvisioningNetwork(t *testing.T) *pxeBed {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	vm := &ironic.VirtualMediaUEFI{Bootloader: imageURL(arm64ESPName), GrubConfigPath: "EFI/BOOT/grub.cfg", GrubConfigTemplate: linuxGrubTemplateFile(t, dir)}
	return vmediaProvisioningNetwork(t, ctx, dir, "pxea64", "arm64", vm)
}

// arm64KernelBootFloor names the floor under vm.arm64.boot_to_heartbeat_s
// (arm64BootFloor).
var arm64KernelBootFloor = metric.Name("vm", "floor", "kernel_boot_arm64_s")

// amd64FirstHeartbeat is the figure vm.arm64.boot_to_heartbeat_s stands
// beside on the performance page: TestVMDeployUEFI's first heartbeat,
// the amd64 ramdisk under UEFI from QEMU's start, in the default run.
const amd64FirstHeartbeat = "vm.deployuefi.deploy_first_heartbeat_s"

// arm64BootFloor boots rd's kernel and initramfs on the arm64 machine's
// shape (m: its NIC, isolated, and a disk like its) under AAVMF with
// internal/testbed/guest/bootfloor, cross-built, laid over /init, as
// TestVMKernelBootFloor does on amd64, and reports the time from QEMU's
// start to that init's line as arm64KernelBootFloor: what AAVMF, the
// kernel and the unpacking of the same initramfs take, the floor under
// the agent's first heartbeat, measured in the same run.
func arm64BootFloor(t *testing.T, ctx context.Context, rd *qemu.Ramdisk, m qemu.Machine) {
	t.Helper()
	f := qemu.Arm64Machine()
	f.Name = "ironic-agent-floor-arm64"
	f.Dir = filepath.Join(m.Dir, "floor")
	f.NICs = []qemu.NIC{{Model: m.NICs[0].Model, MAC: m.NICs[0].MAC, Backend: qemu.NICIsolated}}
	f.Disks, f.Kernel = m.Disks, rd.Kernel
	init := filepath.Join(t.TempDir(), "bootfloor")
	if err := qemu.BuildStaticArch(ctx, qemu.Arm64, "./internal/testbed/guest/bootfloor", init); err != nil {
		t.Fatal(err)
	}
	_, l := bootFloor(t, ctx, f, rd.Initrd, init)
	metric.Seconds(t, arm64KernelBootFloor, l.At)
}

// TestVMArm64Lifecycle is the lifecycle of an arm64 machine through
// Ironic: QEMU's virt machine with AAVMF (under TCG) behind its Redfish
// BMC, a node of the redfish hardware type with the redfish-virtual-media
// boot interface, whose driver_info names the arm64 ramdisk, an ESP of
// GRUB for arm64 as the bootloader Ironic puts into its UEFI ISOs, and
// the kernel parameters of the virt machine's PL011 console, on an Ironic
// of its own whose GRUB template says linux and initrd
// (arm64ProvisioningNetwork). Inspection
// (the inventory is the arm64 machine's), automated cleaning (metadata
// erase), and a deploy of internal/testbed/osimage's arm64 whole-disk
// image (GRUB for arm64 on its ESP, Debian's arm64 kernel, the guest
// cross-built) with a config drive and clean_uefi_nvram as a deploy
// step (AAVMF's UEFI Shell entry deleted through efivarfs); the agent
// writes the NVRAM entry the image's BOOTAA64.CSV names; Ironic ejects
// the CD and powers the disk on, AAVMF boots that entry, and the deployed
// OS prints the config drive's hostname and user-data. (The firmware
// lists no entry of the disk's removable path: a disk without a
// bootindex is left out of its boot order; TestArm64UEFIDisk boots the
// removable path.) The cleaning boot's first heartbeat, from QEMU's
// start, is vm.arm64.boot_to_heartbeat_s, beside its floor measured
// first (arm64BootFloor) and, on the performance page, beside amd64's
// (amd64FirstHeartbeat). Slow (E2E_VM_SLOW): five arm64 boots under TCG.
func TestVMArm64Lifecycle(t *testing.T) {
	slowScenario(t)
	if m := osimage.Missing(); m != "" {
		t.Skipf("SKIPPED: needs %s (in test.sh)", m)
	}
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Minute)
	defer cancel()
	r := newRedfishNode(t, ctx, "uefi", redfishArm64Node, redfishCase{arm64: true})
	writeAt(t, r.disk, 0, pattern(64<<10, 0xa5))

	// The deployed image, built while nothing boots.
	start := time.Now()
	o, err := osimage.BuildArch(ctx, r.m.Dir, qemu.Arm64)
	if err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(r.m.Dir, "os-arm64.raw")
	if err := o.UEFIDisk(ctx, r.m.Dir, raw); err != nil {
		t.Fatal(err)
	}
	reportSeconds(t, time.Since(start), "os_image_build_s")
	arm64BootFloor(t, ctx, arm64Ramdisk(t, ctx), r.m)

	vm := r.l.Inspect(30*time.Minute).report(t, "inspection")
	r.l.WaitOff("inspection")
	ib := r.checkISOBoot(vm)
	checkParam(t, ib.params, "ipa-inspection-callback-url", "http://"+pxeNet.Addr().String()+":5050/v1/continue")
	if !strings.Contains(ib.files, "/EFI/BOOT/grub.cfg") {
		t.Errorf("the ISO has no EFI/BOOT/grub.cfg: %s", ib.files)
	}
	data := r.s.inspectionData(t, ctx, r.node.UUID, time.Minute)
	inv, _ := data["inventory"].(map[string]any)
	checkInventory(t, inv, r.m)

	vm = r.l.Provide(30*time.Minute).report(t, "cleaning")
	r.l.WaitOff("cleaning")
	r.checkISOBoot(vm)
	if l, ok := vm.Find(logtext.Msg(agent.EventHeartbeatSuccessful)); ok {
		// From QEMU's start: AAVMF, GRUB, the kernel and the agent, all
		// emulated; beside vm.arm64.boot_to_inventory_s (e2e/ramdisk).
		t.Log(metric.New("vm.arm64.boot_to_heartbeat_s", l.At.Seconds(), "s", metric.LimitFrom(arm64KernelBootFloor), metric.Beside(amd64FirstHeartbeat)))
	} else {
		t.Error("the cleaning boot did not heartbeat")
	}
	if b := readAt(t, r.disk, 0, 64<<10); !bytes.Equal(b, make([]byte, 64<<10)) {
		t.Error("cleaning did not erase the start of the disk")
	}

	// clean_uefi_nvram as a deploy step before write_image (80): the
	// agent deletes, through efivarfs, the entry of AAVMF's UEFI Shell
	// (its file GUID; the firmware adds it again at the next boot). The
	// image's own entry comes later, from install_bootloader in
	// prepare_instance_boot (60).
	nvram := nodes.DeployStep{Interface: nodes.InterfaceDeploy, Step: "clean_uefi_nvram", Priority: 90,
		Args: map[string]any{"match_patterns": []string{`FvFile\(` + uefiShellFile + `\)`}}}
	img := osBootImage{format: "raw", hostname: "lifecycle-arm64", userData: "#cloud-config\nhostname: lifecycle-arm64\n", steps: []nodes.DeployStep{nvram}}
	vm, osVM := deployOS(t, ctx, osDeploy{s: r.s, node: r.node.UUID, bmc: r.bmc, l: r.l, firmware: "uefi",
		url: r.bed.serveImage(filepath.Base(raw), raw), path: raw, serial: pxeTarget, img: img})
	r.checkISOBoot(vm)
	checkImage(t, r.disk, raw, "uefi")
	loader := `\` + strings.ReplaceAll(osimage.DistroDir, "/", `\`) + `\grubaa64.efi`
	written, ok := vm.Find("UEFI boot entry written")
	if !ok || !strings.Contains(written.Text, "label="+osimage.EFILabel) || !strings.Contains(written.Text, loader) {
		t.Errorf("the agent wrote no boot entry for %s from the image's BOOTAA64.CSV: %q", loader, written.Text)
	}
	if l, ok := vm.Find("deleting UEFI boot entry"); !ok || !strings.Contains(strings.ToUpper(l.Text), uefiShellFile) {
		t.Errorf("clean_uefi_nvram deleted no boot entry of the UEFI Shell: %q", l.Text)
	} else {
		t.Logf("%s", strings.TrimSpace(l.Text[strings.Index(l.Text, "msg="):]))
	}
	if l, ok := osVM.Find(osimage.LoaderLine); ok {
		t.Logf("the deployed image's GRUB for arm64: %q", strings.TrimSpace(l.Text))
	} else {
		t.Error("the deployed image's GRUB did not run")
	}
	if image, _ := r.bmc.Media(bmcsim.RedfishMediaCd); image != "" {
		t.Errorf("the virtual CD still holds %s after the deploy", image)
	}
	t.Logf("BMC events: %s", strings.Join(r.bmc.Events(), "; "))
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}
