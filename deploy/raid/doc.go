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
// Imports: deploy/blockdev, deploy/partition, inventory/hints and
// ipaerror; never agent.
package raid
