package vm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/erase"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/osimage/grubimage"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// TestVMRedfishSecureBootPartition is TestVMRedfishSecureBoot's machine
// (Secure Boot enforced, Microsoft's keys, the release's ESP as Ironic's
// boot loader) with a full erase and a partition image. The node's kernel
// parameters add loglevel=6, so the kernel's "Lockdown:" notices reach
// the console, and its disk is 2 GiB, so the shred ends under TCG.
//
// A manual cleaning runs erase_devices, the full erase (a random pass and
// a zero pass over the disk, as IPA shreds a disk without a secure
// erase), under lockdown: the step completes, the patterns written at the
// disk's start and in its middle are gone, and the test lists what the
// kernel refused during the boot (its "Lockdown:" lines; the agent itself
// must not be among them).
//
// Then a deploy of the test OS's partition image carrying Debian's
// signed shim, GRUB and BOOTX64.CSV in /boot/efi/EFI/debian
// (osimage.SecureBootPartitionImage), with a config drive: the agent
// lays out the ESP, root and config drive, runs the image's grub-mkconfig,
// copies the image's EFI assets onto the ESP, and makes the boot entry
// from the CSV, so it names shim; at the boot after the deploy the
// firmware, still enforcing Secure Boot, runs shim through that entry,
// shim the signed GRUB, GRUB the grub.cfg grub-mkconfig wrote and the
// signed kernel, and the OS reads the SecureBoot variable as enabled, the
// kernel's lockdown as on, and the config drive. Slow (E2E_VM_SLOW):
// three boots under OVMF with SMM.
func TestVMRedfishSecureBootPartition(t *testing.T) {
	slowScenario(t)
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Minute)
	defer cancel()
	r := newSecureBootPartitionNode(t, ctx, redfishSecureBootPartitionNode)
	const middle = 1 << 30
	writeAt(t, r.disk, 0, pattern(64<<10, 0xa5))
	writeAt(t, r.disk, middle, pattern(64<<10, 0x5a))

	// Manual cleaning: the full erase, under lockdown.
	cleaning := r.l.Clean(20*time.Minute, nodes.CleanStep{Interface: nodes.InterfaceDeploy, Step: "erase_devices"})
	vm := cleaning.report(t, "erase_devices")
	r.l.WaitOff("cleaning")
	r.checkISOBoot(vm) // with the node's loglevel=6
	checkAgentSecureBoot(t, "cleaning", vm)
	if _, ok := stepCompleted(vm, "clean", "erase_devices"); !ok {
		t.Error("the agent never said erase_devices completed")
	}
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, logtext.Msg(erase.EventDeviceEraseFinished)) {
			t.Logf("erase_devices under lockdown: %s", logFields(l.Text))
			if m := logField(l.Text, "method"); m != "overwrite" {
				t.Errorf("erase_devices used %q on the virtio disk, want overwrite", m)
			}
		}
	}
	for _, off := range []int64{0, middle} {
		if b := readAt(t, r.disk, off, 64<<10); !bytes.Equal(b, make([]byte, 64<<10)) {
			t.Errorf("erase_devices left data at byte %d of the disk", off)
		}
	}
	refused := lockdownRefusals(t, vm)
	t.Logf("lockdown refused %d operation(s) during the full erase's boot%s", len(refused), strings.Join(append([]string{""}, refused...), "\n  "))
	r.l.Change(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, 2*time.Minute)

	// Deploy: the partition image with Debian's signed chain in its
	// /boot/efi/EFI.
	deploySecureBootPartition(t, ctx, r, efiAssetsImage, "secureboot-partition")
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}

// TestVMRedfishSecureBootGrubInstall is TestVMRedfishSecureBootPartition's
// machine (Secure Boot enforced, Microsoft's keys) deploying, without the
// erase, the partition image whose root has Debian's shim-signed and
// grub-efi-amd64-signed installed and nothing in /boot/efi
// (osimage.SignedPackagesPartitionImage): the agent finds no EFI assets
// and, as IPA's _install_grub2 does, runs the image's grub-install twice
// on the ESP it made, for the image's boot loader directory and with
// --removable; Debian's grub-install copies shim and the signed GRUB (its
// default is --uefi-secure-boot when the signed GRUB is installed), and
// shim becomes the removable-media loader EFI/BOOT/BOOTX64.EFI. No NVRAM
// entry is made (grub-install has no EFI variables in the chroot, and the
// agent looked for loaders before it ran), so the firmware, still
// enforcing Secure Boot, starts its own boot option for the disk: shim at
// the removable path, shim the signed GRUB beside it, GRUB the grub.cfg
// grub-install wrote there, which reads the one grub-mkconfig wrote, and
// the signed kernel; the OS reads the SecureBoot variable as enabled and
// the config drive. The ESP holds shim and the signed GRUB byte for byte.
// Slow (E2E_VM_SLOW): two boots under OVMF with SMM.
func TestVMRedfishSecureBootGrubInstall(t *testing.T) {
	slowScenario(t)
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	r := newSecureBootPartitionNode(t, ctx, redfishSecureBootGrubInstallNode)
	r.l.Change(nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, 2*time.Minute)
	vm := deploySecureBootPartition(t, ctx, r, signedPackagesImage, "secureboot-grub-install")
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, "ignoring GRUB2 boot loader installation failure") {
			t.Logf("the image's grub-install: %s", logFields(l.Text))
		}
	}
	checkESPChain(t, ctx, r.disk)
	reportSeconds(t, time.Since(testStart), "whole_test_s")
}

// newSecureBootPartitionNode skips unless the Secure Boot firmware and
// the partition images' tools are there, and makes machine n enforcing
// Secure Boot behind its Redfish BMC, enrolled with automated cleaning
// off, a 2 GiB disk and loglevel=6 (the kernel's "Lockdown:" notices on
// the console). newRedfishNode checks for mtools, which checkESPChain
// reads the ESP with.
func newSecureBootPartitionNode(t *testing.T, ctx context.Context, n int) *redfishNode {
	t.Helper()
	requireSecureBootFirmware(t)
	if m := grubimage.Missing(); m != "" {
		t.Skipf("SKIPPED: the partition image needs %s (test.sh APT_PACKAGES)", m)
	}
	return newRedfishNode(t, ctx, "uefi", n, redfishCase{secureBoot: true, noAutomatedClean: true, diskMB: 2 << 10, kernelParams: "loglevel=6"})
}

// secureBootPartitionImage is a partition image that boots under Secure
// Boot and how the agent sets its boot up.
type secureBootPartitionImage struct {
	file  string
	build func(o *osimage.OS, ctx context.Context, dir, out string, size int64) error
	// agentSays is the agent's line for the way it set the boot up.
	agentSays string
	// firstBoot matches OVMF's line for the first boot option after
	// the deploy (nil: any); started, when set, the line for the option
	// it started last, which booted the OS.
	firstBoot, started *regexp.Regexp
}

var (
	// efiAssetsImage carries the signed chain in its /boot/efi/EFI: the
	// agent copies those files onto the ESP and points a boot entry at
	// shim (from the CSV).
	efiAssetsImage = secureBootPartitionImage{file: "root-secureboot.img", build: (*osimage.OS).SecureBootPartitionImage,
		agentSays: "boot loader set up from the EFI assets of the image", firstBoot: agentShimEntry}
	// signedPackagesImage has the signed packages installed: the agent
	// runs its grub-install and makes no boot entry, and OVMF starts its
	// own option for the disk, which names no file: the removable-media
	// loader.
	signedPackagesImage = secureBootPartitionImage{file: "root-signed-packages.img", build: (*osimage.OS).SignedPackagesPartitionImage,
		agentSays: "GRUB2 successfully installed", started: regexp.MustCompile(`BdsDxe: starting Boot[0-9A-F]{4} "UEFI [^"]*" from PciRoot\([^\\]*$`)}
)

// deploySecureBootPartition builds img and deploys it, with a config
// drive for hostname, onto r's machine, which enforces Secure Boot, then
// checks the ramdisk's boot, the agent's way of setting the boot up, and
// the boot from the disk (checkSecureBootOS, and through the grub.cfg the
// agent's grub-mkconfig wrote). It returns the ramdisk's boot.
func deploySecureBootPartition(t *testing.T, ctx context.Context, r *redfishNode, img secureBootPartitionImage, hostname string) *qemu.VM {
	t.Helper()
	start := time.Now()
	dir := filepath.Join(r.m.Dir, "osimage")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o, err := osimage.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, img.file)
	if err := img.build(o, ctx, dir, path, 96<<20); err != nil {
		t.Fatal(err)
	}
	reportSeconds(t, time.Since(start), "os_image_build_s")
	userData := "#!/bin/sh\necho " + hostname + "\n"
	vm, diskVM := deployOS(t, ctx, osDeploy{s: r.s, node: r.node.UUID, bmc: r.bmc, l: r.l, firmware: "uefi",
		url: r.bed.serveImage(img.file, path), path: path, serial: pxeTarget,
		img: osBootImage{file: img.file, format: "raw", partition: true, hostname: hostname, userData: userData}})
	r.checkISOBoot(vm)
	checkAgentSecureBoot(t, "deploy", vm)
	if _, ok := vm.Find(img.agentSays); !ok {
		t.Errorf("the agent never said %q", img.agentSays)
	}
	refused := lockdownRefusals(t, vm)
	t.Logf("lockdown refused %d operation(s) during the deploy's boot%s", len(refused), strings.Join(append([]string{""}, refused...), "\n  "))
	if diskVM.Machine.SecureBootDisabled || !diskVM.Machine.SecureBoot {
		t.Errorf("the boot after the deploy was not with the Secure Boot firmware enforcing it: %s", qemu.ShellQuote(diskVM.Cmdline))
	}
	checkSecureBootOS(t, ctx, diskVM, img.firstBoot, hostname, userData)
	if img.started != nil {
		var options []string
		started := ""
		for _, l := range diskVM.Lines() {
			if i := strings.Index(l.Text, "BdsDxe: "); i >= 0 {
				options = append(options, l.Text[i:])
				// The last one started is the one that ran: before it
				// OVMF may start, and Secure Boot refuse, its own
				// shell.
				if strings.HasPrefix(l.Text[i:], "BdsDxe: starting ") {
					started = l.Text[i:]
				}
			}
		}
		t.Logf("OVMF's boot options after the deploy:\n  %s", strings.Join(options, "\n  "))
		if !img.started.MatchString(started) {
			t.Errorf("OVMF started %q, want a line matching %s", started, img.started)
		}
	}
	if _, ok := diskVM.Find("vmlinuz-" + grubimage.KernelVersion); !ok {
		t.Errorf("the OS did not boot through the grub.cfg the agent's grub-mkconfig wrote")
	}
	t.Logf("BMC events: %s", strings.Join(r.bmc.Events(), "; "))
	return vm
}

// checkESPChain checks that the ESP on disk (a raw disk image) holds, at
// the removable-media path, Debian's signed shim with the signed GRUB
// beside it, as the image's grub-install copied them, and lists it.
func checkESPChain(t *testing.T, ctx context.Context, disk string) {
	t.Helper()
	f, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 64<<10)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	pt, err := blockdev.ParsePartTable(f, head, 512)
	if err != nil {
		t.Fatal(err)
	}
	var esp *blockdev.PartEntry
	for i, p := range pt.Partitions {
		if p.TypeGUID == blockdev.ESPTypeGUID {
			esp = &pt.Partitions[i]
		}
	}
	if esp == nil {
		t.Fatalf("no EFI system partition on the deployed disk: %+v", pt.Partitions)
	}
	img := fmt.Sprintf("%s@@%d", disk, esp.Start)
	if out, err := exec.CommandContext(ctx, "mdir", "-/", "-b", "-i", img, "::").CombinedOutput(); err == nil {
		t.Logf("the ESP (partition %d):\n%s", esp.Number, out)
	} else {
		t.Errorf("mdir on the ESP: %v: %s", err, out)
	}
	bc, err := qemu.FetchBootChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	for file, src := range map[string]string{osimage.RemovablePath: bc.Shim, path.Dir(osimage.RemovablePath) + "/grubx64.efi": bc.Grub} {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(tmp, path.Base(file))
		if out, err := exec.CommandContext(ctx, "mcopy", "-n", "-i", img, "::"+file, dst).CombinedOutput(); err != nil {
			t.Errorf("the ESP has no %s: %v: %s", file, err, out)
			continue
		}
		if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, want) {
			t.Errorf("the ESP's %s is not %s (%d bytes, want %d; %v)", file, src, len(got), len(want), err)
		}
	}
}

// lockdownRefusals are the kernel's "Lockdown:" lines on vm's console:
// what lockdown refused, by which program. The agent itself must never be
// refused: it is an error of t.
func lockdownRefusals(t *testing.T, vm *qemu.VM) []string {
	t.Helper()
	var refused []string
	for _, l := range vm.Lines() {
		i := strings.Index(l.Text, "Lockdown:")
		if i < 0 {
			continue
		}
		refused = append(refused, strings.TrimSpace(l.Text[i:]))
		if strings.Contains(l.Text, "Lockdown: ironic-agent:") {
			t.Errorf("lockdown refused the agent: %s", strings.TrimSpace(l.Text))
		}
	}
	return refused
}
