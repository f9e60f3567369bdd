// Package raid is IPA's software RAID (the raid interface's agent side):
// target_raid_config parsing and validation, the partition plan of each
// holder disk, the md arrays and their names, and the create, delete and
// start-up assembly steps built from them.
//
// Arrays are made, stopped, assembled and un-made with mdadm, not with
// the md driver's ioctls (SET_ARRAY_INFO, ADD_NEW_DISK, RUN_ARRAY,
// STOP_ARRAY). The ioctls only start an array: the v1.x superblock each
// member carries (its layout, checksum, bitmap, bad-block log and the
// offsets of the data) is written by user space, and mdadm is the one
// program whose superblocks every kernel, boot loader (GRUB's mdraid1x)
// and distribution initramfs is known to read. Writing our own would
// mean owning that format and its compatibility for every deployed OS
// that assembles these arrays at boot; running mdadm keeps that where it
// is maintained, and matches IPA's command lines one for one. mdadm is
// in internal/programs' registry, so the ramdisk carries it.
//
// The partition tables are written in Go (deploy/partition's writer over
// go-diskfs), not with parted: the same geometry IPA's parted calls give.
// What the kernel already exposes (md members in /sys/block/mdX/slaves,
// partitions, holders) is read from sysfs below a root directory; mdadm is
// asked only for what lives in the superblocks (the array name).
//
// Where this differs from IPA, on purpose:
//
//   - Each volume needs its level's minimum of holder disks (2; 3 for
//     RAID-5, 4 for RAID-6): IPA checks only RAID-5 and RAID-6 against the
//     count of all disks, and mdadm --force then builds a 1-disk "mirror".
//   - Partition names follow the kernel's rule (a "p" after a name ending
//     in a digit: nvme0n1p1, loop0p1), not IPA's "nvme" substring test;
//     both agree for sd*, vd* and nvme*.
//   - md numbers skip arrays that exist (kept by the skip list), where IPA
//     would number from md0 and fail on the kept one.
//   - A volume to create on a holder of an array that is kept is refused:
//     IPA would write a fresh label over that holder and lose the array it
//     was told to keep.
//   - md arrays listed among the disks are never holders.
//   - A confined agent (allowed devices) assembles nothing and does not see
//     arrays with a member outside its allowed devices.
//   - The boot partitions of a holder (boot.go) go in the first free
//     space on a 1 MiB boundary, the room MakePlan kept before the RAID
//     partitions. IPA asks sgdisk -F, the first sector of the largest
//     free block, which is the disk's tail whenever the volumes leave
//     more than 551 MiB unused there.
//   - GRUB on the holders is installed without IPA's md_restart (mdadm
//     --stop then --assemble of the install array before grub-install).
//   - wipefs -af is the Go metadata wipe (blockdev.WipeMetadata), a
//     superset; mdadm --examine is the Go probe for md superblocks of every
//     version (blockdev.Probe); members come from sysfs (slaves/), not from
//     scanning every device with mdadm --examine.
//
// Imports: deploy/blockdev, deploy/partition, deploy/mkfs,
// inventory/hints and ipaerror; never agent. deploy/bootloader imports
// raid, never the reverse.
package raid
