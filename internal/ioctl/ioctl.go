// Package ioctl computes Linux ioctl request numbers as the kernel's
// _IO, _IOR, _IOW and _IOWR macros do, for the architecture the agent is
// built for. The encoding is not the same everywhere: asm-generic's
// (x86, arm64, riscv64, s390x, loong64) has 14 size bits and the
// directions none 0, write 1, read 2 in the top two bits; powerpc's and
// mips's (ppc64le, mips64le) have 13 size bits and none 1, read 2,
// write 4 in the top three. A number written down as a hexadecimal
// constant from an x86 header is wrong on those (BLKFLSBUF is 0x1261 on
// amd64 and arm64, 0x20001261 on ppc64le); computed here it is right by
// construction. golang.org/x/sys/unix carries the numbers it generates
// per architecture; this package is for the ones it lacks (NVMe, IPMI,
// device-mapper, BLKPG).
package ioctl

import "fmt"

// Encoding is one architecture family's layout of an ioctl number.
type Encoding struct {
	// SizeBits is the width of the argument size field.
	SizeBits uint
	// None, Read and Write are the direction field's values.
	None, Read, Write uint32
}

// The two layouts Linux has on 64-bit architectures Go builds for.
var (
	generic = Encoding{SizeBits: 14, None: 0, Write: 1, Read: 2}
	powerpc = Encoding{SizeBits: 13, None: 1, Read: 2, Write: 4}
)

// For returns the encoding of GOARCH goarch; an architecture whose
// layout this package does not know is an error naming it.
func For(goarch string) (Encoding, error) {
	switch goarch {
	case "amd64", "arm64", "riscv64", "s390x", "loong64", "386", "arm":
		return generic, nil
	case "ppc64", "ppc64le", "mips", "mipsle", "mips64", "mips64le":
		return powerpc, nil
	}
	return Encoding{}, fmt.Errorf("ioctl: no known ioctl encoding for GOARCH %s", goarch)
}

const (
	nrBits    = 8
	typeBits  = 8
	typeShift = nrBits
	sizeShift = typeShift + typeBits
)

// ioc is the kernel's _IOC(dir, type, nr, size).
func (e Encoding) ioc(dir uint32, typ, nr byte, size uintptr) uint32 {
	if size >= 1<<e.SizeBits {
		// A struct of the caller's source, not outside input: the
		// tests of every caller compute its numbers.
		panic(fmt.Sprintf("ioctl: argument of %d bytes does not fit %d size bits", size, e.SizeBits))
	}
	return dir<<(sizeShift+e.SizeBits) | uint32(size)<<sizeShift | uint32(typ)<<typeShift | uint32(nr)
}

// IO is _IO(typ, nr): no argument.
func (e Encoding) IO(typ, nr byte) uint32 { return e.ioc(e.None, typ, nr, 0) }

// IOR is _IOR(typ, nr, T) with size sizeof(T): the kernel writes it.
func (e Encoding) IOR(typ, nr byte, size uintptr) uint32 { return e.ioc(e.Read, typ, nr, size) }

// IOW is _IOW(typ, nr, T): the kernel reads it.
func (e Encoding) IOW(typ, nr byte, size uintptr) uint32 { return e.ioc(e.Write, typ, nr, size) }

// IOWR is _IOWR(typ, nr, T): both.
func (e Encoding) IOWR(typ, nr byte, size uintptr) uint32 {
	return e.ioc(e.Read|e.Write, typ, nr, size)
}

// IO, IOR, IOW and IOWR of the host's encoding.
func IO(typ, nr byte) uint32                 { return Host().IO(typ, nr) }
func IOR(typ, nr byte, size uintptr) uint32  { return Host().IOR(typ, nr, size) }
func IOW(typ, nr byte, size uintptr) uint32  { return Host().IOW(typ, nr, size) }
func IOWR(typ, nr byte, size uintptr) uint32 { return Host().IOWR(typ, nr, size) }
