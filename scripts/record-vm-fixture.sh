#!/usr/bin/env bash
# record-vm-fixture.sh [bios|uefi|bios-udev|uefi-udev|ipa13-bios|ipa13-uefi ...] - record fixtures/qemu-bios and
# fixtures/qemu-uefi (and, with -udev, fixtures/qemu-bios-udev: the same VM
# with Debian's udevd run in the guest before the capture; needs the package
# udev on this machine; with ipa13-bios or ipa13-uefi, fixtures/qemu-ipa13-FIRMWARE: the
# machine of e2e/vm's TestVMIPASideBySide, qemu.SideBySideMachine): build
# the agent ramdisk, boot it in a QEMU q35 VM (software emulation) with the
# hardware of internal/testbed/qemu.DefaultMachine (or SideBySideMachine),
# run `ironic-agent capture-fixture` in the guest and write the tree it
# uploads, with a README giving the QEMU command line, date and kernel.
# Then regenerate the golden inventories (see fixtures/README.md).
# Needs qemu-system-x86 and ovmf (UEFI); no root. About 1-3 minutes a boot.
set -euo pipefail
cd "$(dirname "$0")/.."
fws=("$@")
[ "${#fws[@]}" -gt 0 ] || fws=(bios uefi)
for fw in "${fws[@]}"; do
	case "$fw" in
	ipa13-*) go run ./tools/recordfixture -machine side-by-side -firmware "${fw#ipa13-}" -out "fixtures/qemu-$fw" ;;
	*-udev) go run ./tools/recordfixture -udev -firmware "${fw%-udev}" -out "fixtures/qemu-$fw" ;;
	*) go run ./tools/recordfixture -firmware "$fw" -out "fixtures/qemu-$fw" ;;
	esac
done
