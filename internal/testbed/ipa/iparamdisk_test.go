package ipa

import (
	"testing"
)

func TestSkipped(t *testing.T) {
	for _, c := range []struct {
		rel  string
		want bool
	}{
		{"boot/vmlinuz-6.1", true}, {"usr/share/doc/x/copyright", true}, {"usr/share/locale/de/LC_MESSAGES/x.mo", true},
		{"usr/share/locale/locale.alias", false}, {"usr/bin/ironic-python-agent", false}, {"usr/share/docs", false},
		{"var/lib/apt/lists/x", true}, {"var/lib/apt/extended_states", false},
	} {
		if got := skipped(c.rel); got != c.want {
			t.Errorf("skipped(%q) = %v, want %v", c.rel, got, c.want)
		}
	}
}
