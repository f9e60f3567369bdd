package ramdisk

import (
	"strings"
	"testing"
)

// TestISOGrubCfgConsole: the amd64 ISO's GRUB is on COM1 beside the
// screen and its kernel on ttyS0; an arm64 ISO's names no PC serial port
// in GRUB (its GRUB has no COM1: "serial port `com0' isn't found") and no
// console= on the kernel line, so the kernel takes the PL011 the
// firmware's tables name.
func TestISOGrubCfgConsole(t *testing.T) {
	amd64 := isoGrubCfg(defaultISOPlatform(""), "ipa-debug=1")
	for _, want := range []string{"serial --unit=0 --speed=115200\n", "terminal_output console serial\n", " console=ttyS0,115200 boot_method=vmedia ipa-debug=1\n"} {
		if !strings.Contains(amd64, want) {
			t.Errorf("amd64 grub.cfg lacks %q:\n%s", want, amd64)
		}
	}
	arm64 := isoGrubCfg(archISOPlatform("/grub/arm64-efi"), "ipa-debug=1")
	for _, bad := range []string{"serial", "terminal_", "console=", "ttyS"} {
		if strings.Contains(arm64, bad) {
			t.Errorf("arm64 grub.cfg has %q:\n%s", bad, arm64)
		}
	}
	if !strings.Contains(arm64, "\tlinux /boot/"+KernelName+" boot_method=vmedia ipa-debug=1\n") {
		t.Errorf("arm64 grub.cfg's kernel line:\n%s", arm64)
	}
}
