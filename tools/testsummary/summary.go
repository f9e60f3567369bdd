package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/testbed/metric"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, plus
// the build events go test adds).
type event struct {
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string // build-output
}

type options struct {
	top int  // slowest packages and tests listed
	all bool // every test's output, not only the failed ones'
	// metrics, when set, receives every METRIC line of the tests' output
	// (internal/testbed/metric), one a line, with package= and test=
	// added.
	metrics io.Writer
}

// result is a finished package or top-level test.
type result struct {
	pkg, test string
	action    string // pass, fail or skip
	seconds   float64
}

// round is what summarize keeps while it reads.
type round struct {
	w    io.Writer
	opts options
	// output holds each running test's output (package, NUL, test name)
	// until its result says whether it is shown.
	output   map[string]*bytes.Buffer
	packages []result
	tests    []result
	// entries holds the first line of each log entry (file.go:N: ...) of
	// each running test, and failures those of the top-level tests that
	// failed, for the digest at the end of the summary.
	entries  map[string][]string
	failures []failure
}

// failure is a failed (or unfinished) top-level test and the first lines
// of its log entries.
type failure struct {
	pkg, test string
	entries   []string
}

// digestEntries is how many of a failed test's last log entries the
// digest lists: its failure messages come last but for what the test
// cleanups print after them (a service's log, a console's end).
const digestEntries = 12

// summarize reads go test's JSON events from r and writes the plain
// account and the summary to w.
func summarize(r io.Reader, w io.Writer, opts options) error {
	rd := &round{w: w, opts: opts, output: map[string]*bytes.Buffer{}, entries: map[string][]string{}}
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if werr := rd.line(line); werr != nil {
				return fmt.Errorf("write: %w", werr)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read go test's output: %w", err)
		}
	}
	if err := rd.unfinished(""); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := rd.summary(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := rd.digest(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

func key(pkg, test string) string { return pkg + "\x00" + test }

// line handles one line of input.
func (rd *round) line(line []byte) error {
	var e event
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &e) != nil || e.Action == "" {
		if !bytes.HasSuffix(line, []byte("\n")) {
			line = append(line, '\n')
		}
		_, err := rd.w.Write(line)
		return err
	}
	switch e.Action {
	case "build-output":
		_, err := io.WriteString(rd.w, e.Output)
		return err
	case "output":
		if err := rd.metric(e); err != nil {
			return err
		}
		rd.entry(e)
		if rd.opts.all {
			_, err := io.WriteString(rd.w, e.Output)
			return err
		}
		if e.Test != "" && isFraming(e.Output) {
			return nil
		}
		b := rd.output[key(e.Package, e.Test)]
		if b == nil {
			b = &bytes.Buffer{}
			rd.output[key(e.Package, e.Test)] = b
		}
		b.WriteString(e.Output)
	case "pass", "fail", "skip":
		if e.Test == "" {
			if e.Action != "skip" { // skip: no test files
				rd.packages = append(rd.packages, result{pkg: e.Package, action: e.Action, seconds: e.Elapsed})
			}
			return rd.packageDone(e)
		}
		if !strings.Contains(e.Test, "/") {
			rd.tests = append(rd.tests, result{pkg: e.Package, test: e.Test, action: e.Action, seconds: e.Elapsed})
		}
		return rd.finished(e)
	}
	return nil
}

// metric copies a METRIC line of a test's output to the metrics writer.
func (rd *round) metric(e event) error {
	if rd.opts.metrics == nil {
		return nil
	}
	m, ok := metric.Parse(e.Output)
	if !ok {
		return nil
	}
	m.Set("package", e.Package)
	if e.Test != "" {
		m.Set("test", e.Test)
	}
	_, err := io.WriteString(rd.opts.metrics, m.String()+"\n")
	return err
}

// isFraming says whether a line is one of those `go test -v` adds around
// each test's output, which a plain go test leaves out.
func isFraming(s string) bool {
	for _, p := range []string{"=== RUN ", "=== PAUSE ", "=== CONT ", "=== NAME "} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// entryStart matches the first line of a test's log entry as the testing
// package writes it: indented, then file.go:line: and the text.
var entryStart = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)

// entryWidth caps a digest line: a log entry's first line may be a long
// command line or a JSON body.
const entryWidth = 300

// entry keeps the first line of a test's log entry, but for METRIC lines.
func (rd *round) entry(e event) {
	if e.Test == "" || !entryStart.MatchString(e.Output) {
		return
	}
	if _, ok := metric.Parse(e.Output); ok {
		return
	}
	l := strings.TrimSpace(e.Output)
	if len(l) > entryWidth {
		l = l[:entryWidth] + " [...]"
	}
	k := key(e.Package, e.Test)
	rd.entries[k] = append(rd.entries[k], l)
}

// settleEntries does for the digest what finished does for the output:
// a failed subtest's entries go to its parent, a failed top-level test's
// are kept, the others dropped.
func (rd *round) settleEntries(e event) {
	k := key(e.Package, e.Test)
	es := rd.entries[k]
	delete(rd.entries, k)
	if e.Action != "fail" {
		return
	}
	if i := strings.LastIndex(e.Test, "/"); i > 0 {
		pk := key(e.Package, e.Test[:i])
		rd.entries[pk] = append(rd.entries[pk], es...)
		return
	}
	rd.failures = append(rd.failures, failure{pkg: e.Package, test: e.Test, entries: es})
}

// digest lists, last of all, each failed or unfinished top-level test
// with the first lines of its last log entries: a CI log is read from its
// end, and a failed VM test's output ends in pages of service logs and
// console that push its failure message out of sight.
func (rd *round) digest() error {
	for k, es := range rd.entries {
		p, test, _ := strings.Cut(k, "\x00")
		if test != "" && !strings.Contains(test, "/") {
			rd.failures = append(rd.failures, failure{pkg: p, test: test + " (no result)", entries: es})
		}
	}
	if len(rd.failures) == 0 {
		return nil
	}
	slices.SortStableFunc(rd.failures, func(a, b failure) int { return strings.Compare(a.pkg+" "+a.test, b.pkg+" "+b.test) })
	if _, err := fmt.Fprintf(rd.w, "== why the tests failed (the first line of each of their last %d log entries; their whole output is above):\n", digestEntries); err != nil {
		return err
	}
	for _, f := range rd.failures {
		if _, err := fmt.Fprintf(rd.w, "--- %s (%s)\n", f.test, f.pkg); err != nil {
			return err
		}
		es := f.entries
		if len(es) > digestEntries {
			es = es[len(es)-digestEntries:]
		}
		for _, l := range es {
			if _, err := fmt.Fprintf(rd.w, "    %s\n", l); err != nil {
				return err
			}
		}
	}
	return nil
}

// finished settles the output of a test that has its result: a failed
// subtest's goes into its parent's (which fails too, and is written whole
// in the order it ran), a failed top-level test's is written, a passed or
// skipped test's is dropped.
func (rd *round) finished(e event) error {
	rd.settleEntries(e)
	k := key(e.Package, e.Test)
	b := rd.output[k]
	delete(rd.output, k)
	if b == nil || e.Action != "fail" {
		return nil
	}
	if i := strings.LastIndex(e.Test, "/"); i > 0 {
		if parent := rd.output[key(e.Package, e.Test[:i])]; parent != nil {
			parent.Write(b.Bytes())
			return nil
		}
	}
	_, err := rd.w.Write(b.Bytes())
	return err
}

// packageDone writes what the package's binary printed outside its tests:
// for a passed package only its "ok" line (a plain go test drops the rest,
// e.g. "PASS"), else all of it, after the output of its tests that never
// got a result.
func (rd *round) packageDone(e event) error {
	k := key(e.Package, "")
	b := rd.output[k]
	delete(rd.output, k)
	if err := rd.unfinished(e.Package); err != nil || b == nil {
		return err
	}
	if e.Action != "pass" {
		_, err := rd.w.Write(b.Bytes())
		return err
	}
	for l := range strings.Lines(b.String()) {
		if strings.HasPrefix(l, "ok ") {
			if _, err := io.WriteString(rd.w, l); err != nil {
				return err
			}
		}
	}
	return nil
}

// unfinished writes the output of the tests of pkg (of every package when
// pkg is empty) that never got a result: the test binary died while they
// ran (a panic elsewhere, a timeout), and their output says how.
func (rd *round) unfinished(pkg string) error {
	var keys []string
	for k := range rd.output {
		if p, _, _ := strings.Cut(k, "\x00"); pkg == "" || p == pkg {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p, test, _ := strings.Cut(k, "\x00")
		if test == "" { // the package's own output, with no result event
			if _, err := rd.w.Write(rd.output[k].Bytes()); err != nil {
				return err
			}
			delete(rd.output, k)
			continue
		}
		if _, err := fmt.Fprintf(rd.w, "--- NO RESULT: %s (%s): the test binary ended while it ran; its output:\n%s", test, p, rd.output[k].Bytes()); err != nil {
			return err
		}
		delete(rd.output, k)
	}
	return nil
}

// summary lists the slowest packages and top-level tests.
func (rd *round) summary() error {
	if rd.opts.top == 0 || len(rd.packages) == 0 {
		return nil
	}
	count := map[string]int{}
	for _, r := range rd.tests {
		count[r.action]++
	}
	slowest := func(rs []result) []result {
		rs = slices.Clone(rs)
		slices.SortStableFunc(rs, func(a, b result) int {
			switch {
			case a.seconds > b.seconds:
				return -1
			case a.seconds < b.seconds:
				return 1
			}
			return strings.Compare(a.pkg+" "+a.test, b.pkg+" "+b.test)
		})
		return rs[:min(len(rs), rd.opts.top)]
	}
	if _, err := fmt.Fprintf(rd.w, "== slowest packages (of %d run):\n", len(rd.packages)); err != nil {
		return err
	}
	for _, r := range slowest(rd.packages) {
		if _, err := fmt.Fprintf(rd.w, "%8.1f s  %s%s\n", r.seconds, r.pkg, mark(r.action)); err != nil {
			return err
		}
	}
	if len(rd.tests) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(rd.w, "== slowest tests (of %d: %d passed, %d failed, %d skipped):\n", len(rd.tests), count["pass"], count["fail"], count["skip"]); err != nil {
		return err
	}
	for _, r := range slowest(rd.tests) {
		if _, err := fmt.Fprintf(rd.w, "%8.1f s  %s (%s)%s\n", r.seconds, r.test, r.pkg, mark(r.action)); err != nil {
			return err
		}
	}
	return nil
}

// mark flags a result that is not a pass.
func mark(action string) string {
	switch action {
	case "fail":
		return "  FAILED"
	case "skip":
		return "  skipped"
	}
	return ""
}
