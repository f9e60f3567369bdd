package blockdev

import "testing"

func TestFSLabel(t *testing.T) {
	ext := make([]byte, fsProbeLen)
	copy(ext[0x438:], "\x53\xef")
	copy(ext[1024+0x78:], "rootfs")
	xfs := make([]byte, fsProbeLen)
	copy(xfs, "XFSB")
	copy(xfs[108:], "data")
	for _, tc := range []struct {
		b    []byte
		want string
	}{{ext, "rootfs"}, {xfs, "data"}, {make([]byte, 10), ""}, {make([]byte, fsProbeLen), ""}} {
		if got := fsLabel(tc.b); got != tc.want {
			t.Errorf("label %q, want %q", got, tc.want)
		}
	}
}
