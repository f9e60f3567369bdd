package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/logging"
)

// The ready line carries the uptime in the form e2e/vm's uptimeAt reads.
func TestReport(t *testing.T) {
	var b strings.Builder
	report(&b, logging.Seconds(3456*time.Millisecond))
	if got, want := b.String(), "bootfloor: ready uptime=3.456\n"; got != want {
		t.Errorf("report = %q, want %q", got, want)
	}
}
