// Package partition lays out a disk for a partition image (IPA's
// work_on_disk: the plan, the table, mkfs, swap and ephemeral partitions)
// and writes the config drive to a partition of its own.
//
// Imports go one way: partition imports deploy/blockdev, never
// deploy/image, deploy/erase or deploy/bootloader.
package partition
