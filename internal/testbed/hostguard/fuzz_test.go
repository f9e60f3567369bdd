package hostguard

import (
	"strings"
	"testing"
)

func FuzzParseStat(f *testing.F) {
	f.Add("4242 (qemu-system-x86) S 17 4242 4242 0 -1 4194560")
	f.Add("1 ((sd-pam)) S 0 1 1")
	f.Add("7 () Z")
	f.Fuzz(func(t *testing.T, line string) {
		st, err := parseStat(line)
		if err == nil && strings.Contains(line, "(") && !strings.Contains(line, st.comm) {
			t.Errorf("command name %q is not in %q", st.comm, line)
		}
	})
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add("22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n")
	f.Add(`90 22 7:3 / /tmp/esp\040x rw - vfat /dev/loop3 rw` + "\n")
	f.Add("91 22 0:4 net:[4026532] /run/netns/x rw - nsfs nsfs rw\n- - -\n")
	f.Fuzz(func(t *testing.T, text string) {
		ms, err := parseMountinfo(strings.NewReader(text))
		if err == nil && len(ms) > strings.Count(text, "\n")+1 {
			t.Errorf("%d mounts from %d lines", len(ms), strings.Count(text, "\n")+1)
		}
		for _, m := range ms {
			_ = unescapeOctal(m.point)
		}
	})
}
