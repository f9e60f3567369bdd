// Package bootloader makes an installed image bootable, as IPA's
// install_bootloader does: GRUB2 installed with the image's own
// grub-install inside a chroot of its root partition (BIOS, UEFI, PReP),
// the image's EFI assets preserved, and UEFI NVRAM boot entries written
// through efivarfs for the loaders on the ESP. It keeps no agent state:
// the agent binds it to the install_bootloader command.
//
// Imports go one way: bootloader imports deploy/blockdev, deploy/raid
// (a software RAID install device: holders, BIOS boot partitions, the ESP
// mirror; raid in turn imports deploy/partition and deploy/mkfs) and
// internal/efivar; never deploy/image or deploy/erase.
package bootloader
