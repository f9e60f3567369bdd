package bootloader

import (
	"testing"

	"github.com/ironic-go/ironic-agent/internal/efivar"
)

// FuzzEFIBootMgrText: the device paths come from NVRAM, written by any
// firmware or OS; rendering one never panics.
func FuzzEFIBootMgrText(f *testing.F) {
	mac := make([]byte, 33)
	seed := efivar.DevicePath{{Type: 2, SubType: 1, Data: []byte{0xd0, 0x41, 0x03, 0x0a, 0, 0, 0, 0}}, {Type: 1, SubType: 1, Data: []byte{0, 3}},
		{Type: 3, SubType: 11, Data: mac}, {Type: 5, SubType: 1, Data: []byte{1, 0, 0, 0, 'x', 0}}, {Type: 3, SubType: 15, Data: make([]byte, 7)}}
	b, err := efivar.LoadOption{Description: "x", FilePath: seed}.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := efivar.ParseLoadOption(b)
		if err != nil {
			return
		}
		listedByEFIBootMgr(efibootmgrText(o.FilePath))
	})
}
