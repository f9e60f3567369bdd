// Package deploy chooses the disk an image goes to (root-device hints, the
// guard, skip_block_devices) and finishes a whole-disk deploy (config drive,
// partition UUIDs). The disk work itself lives in its subpackages:
//
//   - blockdev: the block-device core every other package builds on: the
//     Guard that refuses foreign or busy devices, opening devices for
//     aligned direct I/O, the partition-table reader, filesystem and
//     partition probes, metadata wiping and the external-program Runner.
//   - ata, nvme: the ATA (SG_IO) and NVMe (admin ioctl) commands the erase
//     steps send; ata/atatest simulates an ATA drive for their tests.
//   - mkfs: swap and FAT filesystems written in Go.
//   - partition: partition layouts for partition images, the config drive.
//   - raid: software RAID (target_raid_config, md arrays, holder layouts).
//   - multipath: device-mapper multipath maps of disks reached over
//     several SCSI paths, and their path checker.
//   - image: downloading, checksumming, sniffing, decompressing and
//     converting images and the pipeline that writes them; qcow2 reads
//     qcow2 images for it.
//   - erase: the erase clean steps (ATA, NVMe format and sanitize,
//     overwrite, discard, metadata, pstore).
//   - bootloader: GRUB installation (with a software RAID install
//     device's holders) and UEFI boot entries.
//   - injectfiles: the inject_files step.
//   - burnin: the burn-in steps (CPU, memory, disk).
//   - internal/configdrivetest: config drives for the tests (the VM test
//     of the NVMe path is in e2e/hw).
//
// Imports go one way, from the leaves up:
//
//	ata, nvme, qcow2                 import no other deploy package
//	blockdev                         imports none of them
//	mkfs, burnin, injectfiles        import blockdev
//	multipath                        imports blockdev
//	image                            imports blockdev and qcow2
//	erase                            imports blockdev, ata and nvme
//	partition                        imports blockdev and mkfs
//	raid                             imports blockdev, mkfs and partition
//	bootloader                       imports blockdev and raid
//	deploy                           imports blockdev, erase and partition
//
// No deploy package imports agent, collector or another package that
// depends on them; a package never imports one listed below it.
package deploy
