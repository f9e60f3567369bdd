package vm

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/metric"
)

// The scenarios report what they time as METRIC lines (tools/testsummary
// collects them, tools/perfpage puts them on docs/performance.md), named
// vm.<test>.<figure>: the test's name without "TestVM" (subtests joined
// with "_"), then the figure, e.g. vm.lifecycle_bios.inspection_s.

// metricName is the scenario's name for one figure.
func metricName(t testing.TB, figure ...string) string {
	return metric.Name(append([]string{"vm", strings.TrimPrefix(t.Name(), "TestVM")}, figure...)...)
}

// reportSeconds reports a duration the test measured.
func reportSeconds(t testing.TB, d time.Duration, figure ...string) {
	t.Helper()
	metric.Seconds(t, metricName(t, figure...), d)
}

// reportSecondsLimit is reportSeconds for a figure whose limit is the
// metric named limit, measured in the same run by another test (a floor,
// floor_test.go).
func reportSecondsLimit(t testing.TB, d time.Duration, limit string, figure ...string) {
	t.Helper()
	metric.Seconds(t, metricName(t, figure...), d, metric.LimitFrom(limit))
}

// reportSecondsText reports a duration a log line gave as text, "12.3s",
// "1m2.5s" or "12.3"; nothing when the line was not found ("?", "").
func reportSecondsText(t testing.TB, s string, figure ...string) {
	t.Helper()
	if v, ok := secondsText(s); ok {
		metric.Report(t, metricName(t, figure...), v, "s")
	}
}

// reportSecondsTextLimit is reportSecondsText for a figure whose limit is
// the metric named limit, measured in the same run by another test (a
// floor, floor_test.go).
func reportSecondsTextLimit(t testing.TB, s, limit string, figure ...string) {
	t.Helper()
	if v, ok := secondsText(s); ok {
		metric.Report(t, metricName(t, figure...), v, "s", metric.LimitFrom(limit))
	}
}

// reportSecondsTextAs reports a duration given as text under a name of
// its own (a floor's), not the test's.
func reportSecondsTextAs(t testing.TB, s, name string) {
	t.Helper()
	if v, ok := secondsText(s); ok {
		metric.Report(t, name, v, "s")
	}
}

// secondsText reads "12.3s", "1m2.5s" or "12.3" as seconds; ok is false
// for anything else ("?", "": the line was not found).
func secondsText(s string) (float64, bool) {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		return v, true
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, false
	}
	return d.Seconds(), true
}

// reportValue reports another figure (MiB, a count).
func reportValue(t testing.TB, v float64, unit string, figure ...string) {
	t.Helper()
	metric.Report(t, metricName(t, figure...), v, unit)
}

// reportSuiteSeconds reports a duration of the shared set-up (the
// ramdisk, the services, the PXE bed), which whichever test comes first
// pays for: named vm.suite.<figure>, whatever that test is.
func reportSuiteSeconds(t testing.TB, d time.Duration, figure ...string) {
	t.Helper()
	metric.Seconds(t, metric.Name(append([]string{"vm", "suite"}, figure...)...), d)
}
