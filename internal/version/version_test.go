package version

import (
	"regexp"
	"testing"
)

func TestRelease(t *testing.T) {
	cases := map[string]string{
		"":                          Base, // not stamped
		"73880b7":                   Base, // no tag: --always gives the hash
		"73880b7-dirty":             Base,
		"v0.2.0":                    "0.2.0",
		"0.2.0":                     "0.2.0",
		"v1.10.3-14-g73880b7":       "1.10.3",
		"v1.10.3-14-g73880b7-dirty": "1.10.3",
		"v1.2":                      Base, // not a release tag
		"release-7":                 Base,
		"v1.2.3-rc1":                Base,
	}
	// What Ironic stores and IPA sends: dotted numbers.
	plain := regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	for in, want := range cases {
		got := release(in)
		if got != want {
			t.Errorf("release(%q) = %q, want %q", in, got, want)
		}
		if !plain.MatchString(got) {
			t.Errorf("release(%q) = %q is not MAJOR.MINOR.PATCH", in, got)
		}
	}
}
