package bootloader

import (
	"testing"

	"github.com/ironic-go/ironic-agent/internal/efivar"
)

func TestEFIBootMgrText(t *testing.T) {
	mac := make([]byte, 33)
	copy(mac, []byte{0x52, 0x54, 0x00, 0x12, 0x34, 0x56})
	mac[32] = 1
	for _, tc := range []struct {
		path   efivar.DevicePath
		want   string
		listed bool
	}{
		{efivar.DevicePath{{Type: 2, SubType: 1, Data: []byte{0xd0, 0x41, 0x03, 0x0a, 0, 0, 0, 0}}, {Type: 1, SubType: 1, Data: []byte{0, 3}}, {Type: 3, SubType: 11, Data: mac}},
			"PciRoot(0x0)/Pci(0x3,0x0)/MAC(525400123456,1)", true},
		{efivar.DevicePath{{Type: 2, SubType: 1, Data: []byte{0xd0, 0x41, 0x08, 0x0a, 1, 0, 0, 0}}}, "PcieRoot(0x1)", false},
		{efivar.DevicePath{efivar.FilePathNode(`\EFI\debian\shimx64.efi`)}, `File(\EFI\debian\shimx64.efi)`, false},
		{efivar.DevicePath{{Type: 4, SubType: 6, Data: make([]byte, 16)}}, "FvFile(00000000-0000-0000-0000-000000000000)", true},
		{efivar.DevicePath{{Type: 3, SubType: 24, Data: []byte("http://x/boot.efi")}}, "Uri(http://x/boot.efi)", false},
	} {
		got := efibootmgrText(tc.path)
		if got != tc.want || listedByEFIBootMgr(got) != tc.listed {
			t.Errorf("%q (listed %v), want %q (listed %v)", got, listedByEFIBootMgr(got), tc.want, tc.listed)
		}
	}
}
