package erase

import (
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

// A disk whose first sectors fail to read (EIO) is not a RAID member: it
// is erased (and the erase names the failing bytes), not skipped with the
// step passing. A probe that cannot tell for another reason still skips,
// as IPA does when lsblk fails.
func TestSkipReasonMediaErrorIsNotRAIDMember(t *testing.T) {
	e := &Eraser{Root: t.TempDir()}
	for _, c := range []struct {
		name string
		err  error
		sig  string
		want string
	}{
		{"media error", fmt.Errorf("probing /dev/sdz (69632 bytes at offset 0): %w", &fs.PathError{Op: "read", Path: "/dev/sdz", Err: syscall.EIO}), "", ""},
		{"cannot open", &fs.PathError{Op: "open", Path: "/dev/sdz", Err: syscall.EACCES}, "", MethodSkippedRAIDMember},
		{"md member", nil, "linux_raid_member", MethodSkippedRAIDMember},
		{"plain disk", nil, "", ""},
	} {
		e.probe = func(string) (string, error) { return c.sig, c.err }
		if got := e.skipReason("/dev/sdz"); got != c.want {
			t.Errorf("%s: skipReason %q, want %q", c.name, got, c.want)
		}
	}
}
