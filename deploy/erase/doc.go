// Package erase is the erase clean steps (erase_devices,
// erase_devices_metadata, erase_devices_express, erase_pstore): the node's
// options, ATA secure erase (deploy/ata's SG_IO), NVMe format and sanitize
// through the kernel's NVMe admin ioctl (deploy/nvme), overwrite passes,
// discard, and metadata wiping, each
// device asked of the Guard first.
//
// Imports go one way: erase imports deploy/blockdev, deploy/ata and
// deploy/nvme, never deploy/image, deploy/partition, deploy/raid or
// deploy/bootloader.
package erase
