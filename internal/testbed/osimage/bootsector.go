package osimage

import (
	"fmt"
	"time"
)

// BootSector is an MBR boot sector whose code writes says and a line end
// to COM1 and then halts, or with resetAfter > 0 waits that long (the
// BIOS's INT 15h AH=86h) and resets the machine through q35's reset
// control register (port 0xcf9, a hard reset): the smallest OS a SeaBIOS
// disk boot proves itself with, or a guest that reboots its machine. The
// wait gives a test time to put another sector on the disk, so the boot
// after the reset does not reset again: a machine that resets at once on
// every boot keeps its BMC restarting QEMU. says must fit in the boot code
// area (446 bytes) beside the code.
func BootSector(says string, resetAfter time.Duration) ([]byte, error) {
	code := []byte{
		0xba, 0xf8, 0x03, // mov dx, 0x3f8 (COM1)
		0xbe, 0x00, 0x00, // mov si, <message> (set below)
		0xac,       // next: lodsb
		0x84, 0xc0, // test al, al
		0x74, 0x03, // jz end
		0xee,       // out dx, al
		0xeb, 0xf8, // jmp next
	}
	if resetAfter > 0 {
		us := resetAfter.Microseconds()
		if us > 0xffffffff {
			return nil, fmt.Errorf("osimage: boot sector reset after %v: the BIOS waits at most %v", resetAfter, time.Duration(0xffffffff)*time.Microsecond)
		}
		code = append(code,
			0xb4, 0x86, // end: mov ah, 0x86 (wait CX:DX microseconds)
			0xb9, byte(us>>16), byte(us>>24), // mov cx, high word
			0xba, byte(us), byte(us>>8), // mov dx, low word
			0xcd, 0x15, // int 0x15
			0xba, 0xf9, 0x0c, // mov dx, 0xcf9
			0xb0, 0x06, // mov al, 6 (hard reset, CPU reset)
			0xee, // out dx, al
		)
	}
	code = append(code,
		0xfa, 0xf4, // cli; hlt
		0xeb, 0xfc, // jmp back to cli
	)
	msg := 0x7c00 + len(code) // the BIOS loads the sector at 0000:7c00
	code[4], code[5] = byte(msg), byte(msg>>8)
	code = append(code, says+"\r\n\x00"...)
	if len(code) > 446 {
		return nil, fmt.Errorf("osimage: boot sector message of %d bytes: the code and message take %d of the MBR's 446 bytes of boot code", len(says), len(code))
	}
	sector := make([]byte, 512)
	copy(sector, code)
	sector[510], sector[511] = 0x55, 0xaa
	return sector, nil
}
