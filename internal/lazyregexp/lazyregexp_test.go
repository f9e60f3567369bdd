package lazyregexp

import (
	"slices"
	"testing"
)

func TestRegexp(t *testing.T) {
	r := New(`^nvme(\d+)n(\d+)$`)
	if !r.MatchString("nvme0n1") || r.MatchString("nvme0") {
		t.Error("MatchString")
	}
	if got := r.FindStringSubmatch("nvme12n3"); !slices.Equal(got, []string{"nvme12n3", "12", "3"}) {
		t.Errorf("FindStringSubmatch = %q", got)
	}
	if r.String() != `^nvme(\d+)n(\d+)$` {
		t.Errorf("String = %q", r.String())
	}
}

func TestBadPatternPanicsInTests(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New compiled nothing in a test binary")
		}
	}()
	New(`(`)
}
