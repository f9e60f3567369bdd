package blockdev

import (
	"testing"
)

func TestMetadataRegions(t *testing.T) {
	regs, err := metadataRegions(100*MiB, 512)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 3 || regs[0].off != 0 || regs[0].len != MiB || regs[1].off != 64*MiB || regs[2].off != 99*MiB || regs[2].len != MiB {
		t.Errorf("100 MiB/512: %+v", regs)
	}
	// A device smaller than the regions is zeroed whole, once.
	regs, _ = metadataRegions(8192, 4096)
	if len(regs) != 1 || regs[0].off != 0 || regs[0].len != 8192 {
		t.Errorf("8 KiB/4096: %+v", regs)
	}
	if _, err := metadataRegions(MiB, 520); err == nil {
		t.Error("520-byte sectors accepted")
	}
	// Every region is sector aligned on 4Kn even for odd sizes.
	regs, _ = metadataRegions(3*MiB+4096*3, 4096)
	for _, r := range regs {
		if r.off%4096 != 0 || r.len%4096 != 0 {
			t.Errorf("unaligned %+v", r)
		}
	}
}
