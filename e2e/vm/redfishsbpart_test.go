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
	requireSecureBootFirmware(t)
	if m := grubimage.Missing(); m != "" {
		t.Skipf("SKIPPED: the partition image needs %s (test.sh APT_PACKAGES)", m)
	}
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Minute)
	defer cancel()
	r := newRedfishNode(t, ctx, "uefi", redfishSecureBootPartitionNode, redfishCase{secureBoot: true, noAutomatedClean: true,
		diskMB: 2 << 10, kernelParams: "loglevel=6"})
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
	start := time.Now()
	dir := filepath.Join(r.m.Dir, "osimage")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o, err := osimage.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "root-secureboot.img")
	if err := o.SecureBootPartitionImage(ctx, dir, img, 96<<20); err != nil {
		t.Fatal(err)
	}
	reportSeconds(t, time.Since(start), "os_image_build_s")
	const hostname, userData = "secureboot-partition", "#!/bin/sh\necho secure boot partition\n"
	vm, diskVM := deployOS(t, ctx, osDeploy{s: r.s, node: r.node.UUID, bmc: r.bmc, l: r.l, firmware: "uefi",
		url: r.bed.serveImage(filepath.Base(img), img), path: img, serial: pxeTarget,
		img: osBootImage{file: filepath.Base(img), format: "raw", partition: true, hostname: hostname, userData: userData}})
	r.checkISOBoot(vm)
	checkAgentSecureBoot(t, "deploy", vm)
	if _, ok := vm.Find("boot loader set up from the EFI assets of the image"); !ok {
		t.Error("the agent did not set the boot up from the image's EFI assets")
	}
	refused = lockdownRefusals(t, vm)
	t.Logf("lockdown refused %d operation(s) during the deploy's boot%s", len(refused), strings.Join(append([]string{""}, refused...), "\n  "))
	if diskVM.Machine.SecureBootDisabled || !diskVM.Machine.SecureBoot {
		t.Errorf("the boot after the deploy was not with the Secure Boot firmware enforcing it: %s", qemu.ShellQuote(diskVM.Cmdline))
	}
	checkSecureBootOS(t, ctx, diskVM, hostname, userData)
	if _, ok := diskVM.Find("vmlinuz-" + grubimage.KernelVersion); !ok {
		t.Errorf("the OS did not boot through the grub.cfg the agent's grub-mkconfig wrote")
	}
	t.Logf("BMC events: %s", strings.Join(r.bmc.Events(), "; "))
	reportSeconds(t, time.Since(testStart), "whole_test_s")
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
