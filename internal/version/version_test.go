package version

import (
	"regexp"
	"testing"
)

// What Ironic stores and IPA sends: dotted numbers, from VERSION.
func TestVersionPlain(t *testing.T) {
	if v := Version(); !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) {
		t.Errorf("Version() = %q (the VERSION file) is not MAJOR.MINOR.PATCH", v)
	}
}

func TestBuild(t *testing.T) {
	const c = "73880b7d2a4f0e8c9b1a2d3e4f5a6b7c8d9e0f1a"
	cases := []struct{ describe, commit, want string }{
		{"v0.2.0", c, "0.2.0"},                           // the release tag, clean
		{"v0.2.0-dirty", c, "0.2.0+g73880b7d2a4f.dirty"}, // the tag, modified
		{"v0.2.0-3-g73880b7", c, "0.2.0+g73880b7d2a4f"},  // after the tag
		{"73880b7", c, "0.2.0+g73880b7d2a4f"},            // no tag at all
		{"v0.1.0", c, "0.2.0+g73880b7d2a4f"},             // another release's tag
		{"", c + "-dirty", "0.2.0+g73880b7d2a4f.dirty"},  // go's VCS stamp
		{"", "", "0.2.0+unknown"},                        // a source tarball
	}
	for _, tc := range cases {
		if got := BuildOf("0.2.0", tc.describe, tc.commit); got != tc.want {
			t.Errorf("build(%q, %q) = %q, want %q", tc.describe, tc.commit, got, tc.want)
		}
	}
}

func TestKernelRelease(t *testing.T) {
	if KernelRelease() == "" {
		t.Error("uname gave no kernel release")
	}
}
