// Package deploy chooses the disk an image goes to (root-device hints, the
// guard, skip_block_devices) and finishes a whole-disk deploy (config drive,
// partition UUIDs). The disk work itself lives in its subpackages:
//
//   - blockdev: the block-device core every other package builds on: the
//     Guard that refuses foreign or busy devices, opening devices for
//     aligned direct I/O, the partition-table reader, filesystem and
//     partition probes, metadata wiping and the external-program Runner.
//   - image: downloading, checksumming, sniffing, decompressing and
//     converting (qcow2, xz) images and the pipeline that writes them.
//   - partition: partition layouts for partition images, the config drive.
//   - erase: the erase clean steps (ATA, NVMe format and sanitize,
//     overwrite, discard, metadata, pstore).
//   - bootloader: GRUB installation and UEFI boot entries.
//
// Imports go one way: blockdev imports none of them; image, partition,
// erase and bootloader import blockdev and not each other; deploy imports
// the subpackages it combines.
package deploy
