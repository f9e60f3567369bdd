// Package kmodtest makes stand-ins for kernel modules in tests: ELF files
// with only the .modinfo section that package kmod reads.
package kmodtest

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// Module returns a minimal ELF64 relocatable file whose only
// section is .modinfo holding the given key=value strings, the part of a
// kernel module this package reads.
func Module(kv ...string) []byte {
	modinfo := []byte(strings.Join(kv, "\x00") + "\x00")
	shstr := []byte("\x00.modinfo\x00.shstrtab\x00")
	const ehsize, shentsize = 64, 64
	modOff := ehsize
	strOff := modOff + len(modinfo)
	shOff := (strOff + len(shstr) + 7) &^ 7
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0})
	b.Write(make([]byte, 8))
	binary.Write(&b, le, uint16(1))  // ET_REL
	binary.Write(&b, le, uint16(62)) // EM_X86_64
	binary.Write(&b, le, uint32(1))
	binary.Write(&b, le, uint64(0)) // entry
	binary.Write(&b, le, uint64(0)) // phoff
	binary.Write(&b, le, uint64(shOff))
	binary.Write(&b, le, uint32(0))
	binary.Write(&b, le, uint16(ehsize))
	binary.Write(&b, le, uint16(0))
	binary.Write(&b, le, uint16(0))
	binary.Write(&b, le, uint16(shentsize))
	binary.Write(&b, le, uint16(3)) // shnum
	binary.Write(&b, le, uint16(2)) // shstrndx
	b.Write(modinfo)
	b.Write(shstr)
	b.Write(make([]byte, shOff-b.Len()))
	sh := func(name, typ uint32, off, size int) {
		binary.Write(&b, le, name)
		binary.Write(&b, le, typ)
		binary.Write(&b, le, uint64(0)) // flags
		binary.Write(&b, le, uint64(0)) // addr
		binary.Write(&b, le, uint64(off))
		binary.Write(&b, le, uint64(size))
		binary.Write(&b, le, uint32(0))
		binary.Write(&b, le, uint32(0))
		binary.Write(&b, le, uint64(1))
		binary.Write(&b, le, uint64(0))
	}
	sh(0, 0, 0, 0)
	sh(1, 1, modOff, len(modinfo)) // .modinfo, PROGBITS
	sh(10, 3, strOff, len(shstr))  // .shstrtab, STRTAB
	return b.Bytes()
}
