// Package image writes a disk image to a device as IPA's prepare_image and
// write_image do: it downloads (with resume and proxies), verifies the
// checksum, sniffs the format and compression, converts qcow2 and xz as it
// streams, and writes through an aligned, concurrent pipeline; it also
// parses Ironic's image_info and checks the partition table the image left.
//
// Imports go one way: image imports deploy/blockdev (and deploy/qcow2),
// never deploy/partition, deploy/erase or deploy/bootloader. Only its
// tests import deploy/partition, to write partition images into the
// layouts partition.WorkOnDisk makes.
package image
