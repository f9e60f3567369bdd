package agent

import "testing"

func TestPeakRSS(t *testing.T) {
	self, children := peakRSS()
	// A Go test binary holds a few MiB at least; children may be 0.
	if self < 1024 || children < 0 {
		t.Errorf("peakRSS() = %d KiB, children %d KiB", self, children)
	}
}
