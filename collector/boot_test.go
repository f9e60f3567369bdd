package collector

import (
	"context"
	"testing"
)

func TestBootAndHostname(t *testing.T) {
	root := tree(t, map[string]string{
		"sys/firmware/efi/":        "",
		"proc/cmdline":             "BOOT_IMAGE=/vmlinuz ipa-api-url=http://192.0.2.1:6385 BOOTIF=01-52-54-00-aa-bb-cc quiet\n",
		"proc/sys/kernel/hostname": "node-7\n",
	})
	inv, err := Collect(context.Background(), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if inv.Boot.CurrentBootMode != "uefi" || inv.Boot.PXEInterface == nil || *inv.Boot.PXEInterface != "01-52-54-00-aa-bb-cc" || inv.Hostname != "node-7" {
		t.Errorf("boot %+v pxe %v hostname %q", inv.Boot, inv.Boot.PXEInterface, inv.Hostname)
	}
	root = tree(t, map[string]string{"proc/cmdline": "console=ttyS0 -- BOOTIF\n"})
	inv, _ = Collect(context.Background(), Options{Root: root})
	if inv.Boot.CurrentBootMode != "bios" || inv.Boot.PXEInterface != nil {
		t.Errorf("boot %+v", inv.Boot)
	}
}

func TestKernelParams(t *testing.T) {
	p := kernelParams(`a=1 b="x y" flag c=d=e a=2`)
	want := map[string]string{"a": "2", "b": `"x`, "c": "d=e"}
	if len(p) != len(want) {
		t.Errorf("params = %q", p)
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s = %q, want %q", k, p[k], v)
		}
	}
}

func FuzzKernelParams(f *testing.F) {
	f.Add("BOOTIF=01-aa-bb-cc-dd-ee-ff ipa-debug=1 quiet")
	f.Add("a==b =c d=")
	f.Fuzz(func(t *testing.T, s string) {
		for k := range kernelParams(s) {
			if k == "" && len(s) == 0 {
				t.Fatal("key from empty line")
			}
		}
	})
}
