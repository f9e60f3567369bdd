package blockdev

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/devmapper"
)

// PartitionPath is the kernel's name for partition n of dev: sda1,
// nvme0n1p1, loop0p1, mmcblk0p1; for a multipath map, kpartx's
// /dev/mapper/<map>-part<N>.
func PartitionPath(dev string, n int) string {
	base := dev
	if r, err := filepath.EvalSymlinks(dev); err == nil {
		base = r
	}
	if strings.HasPrefix(filepath.Base(base), "dm-") {
		if sys, err := SysBlockDir("/", base); err == nil {
			if name, _, ok := multipathMap(sys); ok {
				return filepath.Join(devmapper.MapperDir, partitionMapName(name, n))
			}
		}
	}
	if last := base[len(base)-1]; last >= '0' && last <= '9' {
		return fmt.Sprintf("%sp%d", base, n)
	}
	return fmt.Sprintf("%s%d", base, n)
}
