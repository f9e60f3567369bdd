// Package metric makes the figures tests and benchmarks measure machine
// readable: each is one line
//
//	METRIC name=<dotted.name> value=<number> unit=<unit> [limit=<number>] [target=<number>]
//
// printed through t.Log, so it lands in go test's output and in its -json
// stream, where tools/testsummary -metrics collects it. The benchmark
// scripts (scripts/bench-*.sh) print the same line, and tools/perfpage
// turns the collected lines into docs/performance.md: figures are
// produced by the run, never typed into a page.
//
// limit is the same quantity measured in the same run by the bound the
// figure is compared with (the tools alone, curl | dd, the kernel's own
// boot); target is the goal the project sets for the figure. A figure
// whose bound is measured elsewhere in the run (another test, a VM of its
// own) names that bound's metric instead: limit_from=<name> (LimitFrom),
// and tools/perfpage sets beside the figure the value that metric has in
// the same metrics file, so a limit never comes from another run.
package metric

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Prefix starts every metric line.
const Prefix = "METRIC "

// Metric is one figure.
type Metric struct {
	Name  string // dotted, lower case: vm.lifecycle_bios.inspection_s
	Value float64
	Unit  string // s, ms, MB/s, MiB, x
	// Limit and Target are NaN when absent.
	Limit, Target float64
	// Extra holds further key=value fields, in order: tools/testsummary
	// adds package= and test= when it collects a line.
	Extra [][2]string
}

// Option sets an optional field of a reported metric.
type Option func(*Metric)

// Limit is the same quantity measured in the same run by the bound the
// figure is compared with.
func Limit(v float64) Option { return func(m *Metric) { m.Limit = v } }

// Target is the goal set for the figure.
func Target(v float64) Option { return func(m *Metric) { m.Target = v } }

// LimitFromKey is the extra field naming the metric that is a figure's
// limit, when the bound is measured apart from the figure in the same run.
const LimitFromKey = "limit_from"

// LimitFrom names the metric, measured in the same run, that is the
// figure's limit (the line carries limit_from=name).
func LimitFrom(name string) Option { return func(m *Metric) { m.Set(LimitFromKey, name) } }

// BesideKey is the extra field naming the figure a figure stands beside
// on the performance page: the same quantity measured another way, such
// as on another architecture. tools/perfpage puts its row after that
// figure's.
const BesideKey = "beside"

// Beside names the figure this one stands beside (the line carries
// beside=name).
func Beside(name string) Option { return func(m *Metric) { m.Set(BesideKey, name) } }

var (
	nameRE = regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_]+)*$`)
	unitRE = regexp.MustCompile(`^[A-Za-z%][A-Za-z0-9%/_]*$`)
	keyRE  = regexp.MustCompile(`^[a-z_]+$`)
)

// New returns a metric with the options applied.
func New(name string, value float64, unit string, opts ...Option) Metric {
	m := Metric{Name: name, Value: value, Unit: unit, Limit: math.NaN(), Target: math.NaN()}
	for _, o := range opts {
		o(&m)
	}
	return m
}

// Validate says what is wrong with m, if anything.
func (m Metric) Validate() error {
	var errs []error
	if !nameRE.MatchString(m.Name) {
		errs = append(errs, fmt.Errorf("name %q: want lower-case words joined by dots (metric.Name builds one)", m.Name))
	}
	if !unitRE.MatchString(m.Unit) {
		errs = append(errs, fmt.Errorf("unit %q: want a unit such as s, ms, MB/s, MiB, x", m.Unit))
	}
	if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
		errs = append(errs, fmt.Errorf("value %v is not a number", m.Value))
	}
	if math.IsInf(m.Limit, 0) || math.IsInf(m.Target, 0) {
		errs = append(errs, errors.New("limit or target is infinite"))
	}
	for _, kv := range m.Extra {
		if !keyRE.MatchString(kv[0]) || kv[1] == "" || strings.ContainsAny(kv[1], " \t\n") {
			errs = append(errs, fmt.Errorf("field %q=%q: want a lower-case key and a value without spaces", kv[0], kv[1]))
		}
	}
	for _, k := range []string{LimitFromKey, BesideKey} {
		if v := m.Get(k); v != "" && !nameRE.MatchString(v) {
			errs = append(errs, fmt.Errorf("%s=%q: want a metric name", k, v))
		} else if v == m.Name {
			errs = append(errs, fmt.Errorf("%s=%q names the figure itself", k, v))
		}
	}
	if lf := m.Get(LimitFromKey); lf != "" {
		if !math.IsNaN(m.Limit) {
			errs = append(errs, fmt.Errorf("both limit=%s and %s=%s: give one", Number(m.Limit), LimitFromKey, lf))
		}
	}
	return errors.Join(errs...)
}

// Number formats a value as metric lines carry it: at most three
// decimals from 1 up, four significant digits below.
func Number(v float64) string {
	if a := math.Abs(v); a >= 1 || a == 0 {
		return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// String is the metric line.
func (m Metric) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%sname=%s value=%s unit=%s", Prefix, m.Name, Number(m.Value), m.Unit)
	if !math.IsNaN(m.Limit) {
		b.WriteString(" limit=" + Number(m.Limit))
	}
	if !math.IsNaN(m.Target) {
		b.WriteString(" target=" + Number(m.Target))
	}
	for _, kv := range m.Extra {
		b.WriteString(" " + kv[0] + "=" + kv[1])
	}
	return b.String()
}

// Get returns the value of an extra field, "" when absent.
func (m Metric) Get(key string) string {
	for _, kv := range m.Extra {
		if kv[0] == key {
			return kv[1]
		}
	}
	return ""
}

// Set sets an extra field, replacing one of the same key.
func (m *Metric) Set(key, value string) {
	for i := range m.Extra {
		if m.Extra[i][0] == key {
			m.Extra[i][1] = value
			return
		}
	}
	m.Extra = append(m.Extra, [2]string{key, value})
}

// Report prints one metric line through t.Log (so go test -v and
// go test -json carry it). A malformed name or value fails the test: the
// figure would be lost otherwise.
func Report(t testing.TB, name string, value float64, unit string, opts ...Option) {
	t.Helper()
	m := New(name, value, unit, opts...)
	if err := m.Validate(); err != nil {
		t.Errorf("metric: %v", err)
		return
	}
	t.Log(m.String())
}

// Seconds reports a duration in seconds.
func Seconds(t testing.TB, name string, d time.Duration, opts ...Option) {
	t.Helper()
	Report(t, name, d.Seconds(), "s", opts...)
}

// Name joins parts into a metric name, each lower-cased with every run
// of other characters than letters, digits and underscores made one
// underscore: Name("vm", "PXE/UEFI", "boot_s") is "vm.pxe_uefi.boot_s".
func Name(parts ...string) string {
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		var b strings.Builder
		under := false
		for _, r := range strings.ToLower(p) {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
				b.WriteRune(r)
				under = false
			} else if !under && b.Len() > 0 {
				b.WriteByte('_')
				under = true
			}
		}
		if s := strings.Trim(b.String(), "_"); s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, ".")
}

// Parse finds a metric line in s (a line of go test output, where t.Log
// puts "file.go:NN: " before it, or a line a script printed). ok is false
// when s holds none or the fields do not parse.
func Parse(s string) (m Metric, ok bool) {
	i := strings.Index(s, Prefix)
	if i < 0 {
		return m, false
	}
	m = Metric{Limit: math.NaN(), Target: math.NaN(), Value: math.NaN()}
	seen := map[string]bool{}
	for _, f := range strings.Fields(s[i+len(Prefix):]) {
		k, v, found := strings.Cut(f, "=")
		if !found || seen[k] {
			return m, false
		}
		seen[k] = true
		var err error
		switch k {
		case "name":
			m.Name = v
		case "unit":
			m.Unit = v
		case "value":
			m.Value, err = strconv.ParseFloat(v, 64)
		case "limit":
			m.Limit, err = strconv.ParseFloat(v, 64)
		case "target":
			m.Target, err = strconv.ParseFloat(v, 64)
		default:
			m.Extra = append(m.Extra, [2]string{k, v})
		}
		if err != nil {
			return m, false
		}
	}
	return m, m.Validate() == nil
}
