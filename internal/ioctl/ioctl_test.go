package ioctl

import (
	"runtime"
	"testing"
)

// TestKernelValues compares the numbers computed for amd64, arm64 and
// ppc64le with the kernel headers' values for each: the ones
// golang.org/x/sys/unix generates from the headers per architecture
// (zerrors_linux_<arch>.go), and the ones it lacks worked out from the
// uapi headers' macros and the 64-bit struct sizes (nvme_ioctl.h,
// ipmi.h, dm-ioctl.h, fs.h).
func TestKernelValues(t *testing.T) {
	type want struct{ generic, ppc uint32 }
	for _, c := range []struct {
		name string
		got  func(Encoding) uint32
		want want
	}{
		// linux/fs.h, as x/sys/unix has them.
		{"BLKFLSBUF", func(e Encoding) uint32 { return e.IO(0x12, 97) }, want{0x1261, 0x20001261}},
		{"BLKRRPART", func(e Encoding) uint32 { return e.IO(0x12, 95) }, want{0x125f, 0x2000125f}},
		{"BLKGETSIZE64", func(e Encoding) uint32 { return e.IOR(0x12, 114, 8) }, want{0x80081272, 0x40081272}},
		{"FS_IOC_SETFLAGS", func(e Encoding) uint32 { return e.IOW('f', 2, 8) }, want{0x40086602, 0x80086602}},
		{"TIOCGPTN", func(e Encoding) uint32 { return e.IOR('T', 0x30, 4) }, want{0x80045430, 0x40045430}},
		// linux/blkpg.h: BLKPG _IO(0x12,105).
		{"BLKPG", func(e Encoding) uint32 { return e.IO(0x12, 105) }, want{0x1269, 0x20001269}},
		// linux/nvme_ioctl.h: struct nvme_admin_cmd is 72 bytes.
		{"NVME_IOCTL_ID", func(e Encoding) uint32 { return e.IO('N', 0x40) }, want{0x4e40, 0x20004e40}},
		{"NVME_IOCTL_ADMIN_CMD", func(e Encoding) uint32 { return e.IOWR('N', 0x41, 72) }, want{0xc0484e41, 0xc0484e41}},
		// linux/ipmi.h: struct ipmi_req is 40 bytes, struct ipmi_recv 48.
		{"IPMICTL_SEND_COMMAND", func(e Encoding) uint32 { return e.IOR('i', 13, 40) }, want{0x8028690d, 0x4028690d}},
		{"IPMICTL_RECEIVE_MSG_TRUNC", func(e Encoding) uint32 { return e.IOWR('i', 11, 48) }, want{0xc030690b, 0xc030690b}},
		// linux/dm-ioctl.h: struct dm_ioctl is 312 bytes.
		{"DM_VERSION", func(e Encoding) uint32 { return e.IOWR(0xfd, 0, 312) }, want{0xc138fd00, 0xc138fd00}},
	} {
		for _, arch := range []string{"amd64", "arm64", "ppc64le"} {
			e, err := For(arch)
			if err != nil {
				t.Fatal(err)
			}
			w := c.want.generic
			if arch == "ppc64le" {
				w = c.want.ppc
			}
			if got := c.got(e); got != w {
				t.Errorf("%s on %s: %#x, want %#x", c.name, arch, got, w)
			}
		}
	}
}

// TestFor: every architecture with a Host file is known to For with the
// same layout, and an unknown one is refused by name.
func TestFor(t *testing.T) {
	e, err := For(runtime.GOARCH)
	if err != nil || e != Host() {
		t.Errorf("For(%s) = %+v, %v; Host() = %+v", runtime.GOARCH, e, err, Host())
	}
	if _, err := For("vax"); err == nil || err.Error() != "ioctl: no known ioctl encoding for GOARCH vax" {
		t.Errorf("For(vax): %v", err)
	}
}
