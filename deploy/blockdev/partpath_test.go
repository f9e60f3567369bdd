package blockdev

import (
	"testing"
)

func TestPartitionPath(t *testing.T) {
	for dev, want := range map[string]string{"/dev/sda": "/dev/sda2", "/dev/nvme0n1": "/dev/nvme0n1p2", "/dev/loop3": "/dev/loop3p2"} {
		if got := PartitionPath(dev, 2); got != want {
			t.Errorf("%s: %s, want %s", dev, got, want)
		}
	}
}
