package ramdisk

import (
	"strings"
	"testing"
)

// TestCheckBudget: the kernel and the initramfs count against SizeBudget,
// the extra files an operator adds (ExtraFilesItem) do not.
func TestCheckBudget(t *testing.T) {
	const mib = 1 << 20
	if err := CheckBudget(12*mib, 36*mib, nil, SizeBudget); err != nil {
		t.Errorf("48 MiB: %v", err)
	}
	err := CheckBudget(12*mib, 36*mib+1, nil, SizeBudget)
	if err == nil || !strings.Contains(err.Error(), "over the 48 MiB budget") {
		t.Errorf("48 MiB and a byte: %v", err)
	}
	extra := []SizeItem{{Item: "agent", Gzip: 5 * mib}, {Item: ExtraFilesItem, Files: 2, Gzip: 4 * mib}}
	if err := CheckBudget(12*mib, 40*mib, extra, SizeBudget); err != nil {
		t.Errorf("36 MiB of the project's and 4 of extra files: %v", err)
	}
	if err := CheckBudget(12*mib, 60*mib, nil, 0); err != nil {
		t.Errorf("no limit: %v", err)
	}
}
