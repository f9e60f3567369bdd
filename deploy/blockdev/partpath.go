package blockdev

import (
	"fmt"
	"path/filepath"
)

// PartitionPath is the kernel's name for partition n of dev: sda1,
// nvme0n1p1, loop0p1, mmcblk0p1.
func PartitionPath(dev string, n int) string {
	base := dev
	if r, err := filepath.EvalSymlinks(dev); err == nil {
		base = r
	}
	if last := base[len(base)-1]; last >= '0' && last <= '9' {
		return fmt.Sprintf("%sp%d", base, n)
	}
	return fmt.Sprintf("%s%d", base, n)
}
