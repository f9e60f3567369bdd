package image

import (
	"bytes"
	"encoding/binary"
)

// Compression is the outer container of an image file, found by its magic
// bytes: the URL's suffix says nothing reliable about what a server sends.
type Compression string

// Compressions this agent can stream through a decoder.
const (
	CompressionNone  Compression = ""
	CompressionGzip  Compression = "gzip"
	CompressionZstd  Compression = "zstd"
	CompressionXz    Compression = "xz"
	CompressionBzip2 Compression = "bzip2"
)

// Disk image formats, named as IPA's format inspector names them so that
// permitted_image_formats and disk_format compare with the same words.
const (
	FormatRaw   = "raw"
	FormatGPT   = "gpt"
	FormatQcow2 = "qcow2"
	FormatISO   = "iso"
	FormatVMDK  = "vmdk"
	FormatVHD   = "vhd"
	FormatVHDX  = "vhdx"
	FormatVDI   = "vdi"
	FormatLUKS  = "luks"
)

// SniffLen is how many leading bytes DetectFormat wants: the ISO9660
// volume descriptor sits at 32 KiB + 1.
const SniffLen = 64 << 10

// DetectCompression names the compression of data that starts with head.
func DetectCompression(head []byte) Compression {
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return CompressionGzip
	case bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return CompressionZstd
	case bytes.HasPrefix(head, []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}):
		return CompressionXz
	case len(head) >= 4 && bytes.HasPrefix(head, []byte("BZh")) && head[3] >= '1' && head[3] <= '9':
		return CompressionBzip2
	}
	return CompressionNone
}

// DetectFormat names the disk image format of uncompressed data starting
// with head (ideally SniffLen bytes). Anything unrecognised is raw, as in
// IPA's inspector; a raw disk with a protective MBR is "gpt".
func DetectFormat(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("QFI\xfb")):
		return FormatQcow2
	case bytes.HasPrefix(head, []byte("KDMV")), bytes.HasPrefix(head, []byte("# Disk DescriptorFile")):
		return FormatVMDK
	case bytes.HasPrefix(head, []byte("vhdxfile")):
		return FormatVHDX
	case bytes.HasPrefix(head, []byte("conectix")):
		return FormatVHD
	case bytes.HasPrefix(head, []byte("LUKS\xba\xbe")):
		return FormatLUKS
	case len(head) >= 0x44 && binary.LittleEndian.Uint32(head[0x40:]) == 0xbeda107f:
		return FormatVDI
	case len(head) >= 0x8006 && string(head[0x8001:0x8006]) == "CD001":
		return FormatISO
	case len(head) >= 512 && head[510] == 0x55 && head[511] == 0xaa && head[446+4] == 0xee:
		return FormatGPT
	}
	return FormatRaw
}

// rawLike reports whether a format is written byte for byte.
func rawLike(format string) bool {
	return format == FormatRaw || format == FormatGPT || format == FormatISO
}
