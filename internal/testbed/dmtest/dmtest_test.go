package dmtest

import (
	"testing"

	"github.com/ironic-go/ironic-agent/internal/devmapper"
)

// The failing targets' parameter lines are dmsetup's.
func TestTargets(t *testing.T) {
	for _, c := range []struct {
		got  devmapper.Target
		want string
	}{
		{Error(2048, 8), "2048 8 error "},
		{Delay(0, 100, "/dev/vda", 16, 50), "0 100 delay /dev/vda 16 50"},
		{Flakey(0, 100, "/dev/vda", 0, 1, 60), "0 100 flakey /dev/vda 0 1 60"},
	} {
		if s := c.got.String(); s != c.want {
			t.Errorf("%q, want %q", s, c.want)
		}
	}
}
