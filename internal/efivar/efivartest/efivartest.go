// Package efivartest gives tests a stand-in for efivarfs: a directory
// holding the boot entries of a Debian install, a listing of what a Store
// holds, and shim's UTF-16 BOOT*.CSV encoding. This machine's NVRAM is not
// the tests' to change.
package efivartest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/ironic-go/ironic-agent/internal/efivar"
)

// FakeNVRAM is a directory laid out like efivarfs holding what efibootmgr
// listed on a machine with a Debian install: Boot0001 "debian" and
// Boot0002 "UEFI PXEv4", in that order.
func FakeNVRAM(t testing.TB) efivar.Store {
	s := efivar.Store{Dir: t.TempDir()}
	add := func(n uint16, label string, path efivar.DevicePath) {
		b, err := efivar.LoadOption{Attributes: efivar.LoadOptionActive, Description: label, FilePath: path}.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Set(efivar.BootName(n), efivar.BootVarAttributes, b); err != nil {
			t.Fatal(err)
		}
	}
	add(1, "debian", efivar.DevicePath{efivar.FilePathNode(`\EFI\debian\shimx64.efi`)})
	add(2, "UEFI PXEv4", efivar.DevicePath{{Type: 3, SubType: 11, Data: make([]byte, 33)}})
	if err := s.SetBootOrder([]uint16{1, 2}); err != nil {
		t.Fatal(err)
	}
	return s
}

// NVRAM lists the boot entries as "Boot0001 label path" lines, BootOrder
// first.
func NVRAM(t testing.TB, s efivar.Store) string {
	t.Helper()
	order, err := s.BootOrder()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "BootOrder %04X\n", order)
	entries, err := s.BootEntries()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Err != nil {
			t.Fatal(e.Err)
		}
		fmt.Fprintf(&b, "%s %s %s\n", efivar.BootName(e.Num), e.Option.Description, e.Option.FilePath)
	}
	return b.String()
}

// UTF16LE encodes s as shim writes BOOT*.CSV: UTF-16LE after a byte order
// mark.
func UTF16LE(s string) []byte {
	var b bytes.Buffer
	b.Write([]byte{0xff, 0xfe})
	for _, u := range utf16.Encode([]rune(s)) {
		_ = binary.Write(&b, binary.LittleEndian, u)
	}
	return b.Bytes()
}
