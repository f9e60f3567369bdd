// Package blockdev is the block-device core of the disk packages: the Guard
// that decides whether a device may be written or erased, opening a device
// for aligned direct I/O, the kernel's view of partitions (BLKPG, re-read,
// sysfs), the tolerant partition-table reader, filesystem and partition
// probes (UUIDs, labels, the ESP), metadata wiping, and the Runner for the
// external programs that have no Go path.
//
// Imports go one way: every other deploy package except ata, nvme and
// qcow2 imports blockdev; blockdev imports none of them (see deploy's
// package doc for the whole order).
package blockdev
