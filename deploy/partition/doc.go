// Package partition lays out a disk for a partition image (IPA's
// work_on_disk: the plan, the table, mkfs, swap and ephemeral partitions)
// and writes the config drive to a partition of its own.
//
// Imports go one way: partition imports deploy/blockdev and deploy/mkfs,
// never deploy/image, deploy/erase, deploy/raid or deploy/bootloader
// (raid and, through it, bootloader import partition).
package partition
