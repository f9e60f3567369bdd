package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/round.golden")

// testdata/round.jsonl is `go test -json -timeout 3s ./...` of a module
// whose packages pass, fail (in a subtest), skip, fail to build, panic,
// hang past the timeout and have no tests.
func readRound(t *testing.T) []byte {
	t.Helper()
	in, err := os.ReadFile(filepath.Join("testdata", "round.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestSummarizeGolden: what a plain go test shows, then the slowest
// packages and tests.
func TestSummarizeGolden(t *testing.T) {
	var out bytes.Buffer
	if err := summarize(bytes.NewReader(readRound(t)), &out, options{top: 4}); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "round.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("summary differs from %s (go test ./tools/testsummary -update rewrites it):\n%s", golden, out.Bytes())
	}
	for _, hidden := range []string{"output of a passing test", "a log line of a passing test", "=== RUN", "SKIPPED: needs", "\nPASS\n"} {
		if strings.Contains(out.String(), hidden) {
			t.Errorf("the summary shows %q, which a plain go test leaves out", hidden)
		}
	}
	for _, shown := range []string{"undefined: undefined", "want 1, got 2", "printed to stdout by the test", "panic: test timed out after 3s",
		"--- NO RESULT: TestHangs", "--- TestBroken (example.com/round/fail)\n    fail_test.go:11: what the test saw before it failed\n    fail_test.go:13: want 1, got 2\n", "ok  \texample.com/round/ok", "FAIL\texample.com/round/fail", "[no test files]",
		"== slowest tests (of 8: 5 passed, 2 failed, 1 skipped):\n     0.3 s  TestSlow (example.com/round/ok)\n"} {
		if !strings.Contains(out.String(), shown) {
			t.Errorf("the summary lacks %q", shown)
		}
	}
}

// TestSummarizeAll: with -all every test's output is written, as go test -v
// shows it.
func TestSummarizeAll(t *testing.T) {
	var out bytes.Buffer
	if err := summarize(bytes.NewReader(readRound(t)), &out, options{top: 1, all: true}); err != nil {
		t.Fatal(err)
	}
	for _, shown := range []string{"=== RUN   TestFine", "output of a passing test in a failing package", "SKIPPED: needs something", "--- PASS: TestSlow"} {
		if !strings.Contains(out.String(), shown) {
			t.Errorf("-all: the output lacks %q", shown)
		}
	}
}

// TestSummarizeOtherLines: what is not go test's JSON passes unchanged,
// and input without a package result gives no summary.
func TestSummarizeOtherLines(t *testing.T) {
	var out bytes.Buffer
	in := "plain text\n{\"not\": \"an event\"}\n{broken\n[1]\nno newline at the end"
	if err := summarize(strings.NewReader(in), &out, options{top: 5}); err != nil {
		t.Fatal(err)
	}
	if want := in + "\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

// FuzzSummarize: any input is summarized without a panic or an error.
func FuzzSummarize(f *testing.F) {
	round, err := os.ReadFile(filepath.Join("testdata", "round.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(round)
	f.Add([]byte(`{"Action":"output","Package":"p","Test":"T/sub","Output":"x\n"}` + "\n" + `{"Action":"fail","Package":"p","Test":"T/sub"}`))
	f.Add([]byte(`{"Action":"fail","Package":"p","Elapsed":1.5}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		if err := summarize(bytes.NewReader(in), &out, options{top: 3}); err != nil {
			t.Fatal(err)
		}
		if err := summarize(bytes.NewReader(in), &out, options{top: 3, all: true}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSummarizeMetrics: -metrics collects the METRIC lines of every test
// (passed or not, subtests too) with its package and test, and the
// summary itself is what it is without the flag.
func TestSummarizeMetrics(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestVM"}`,
		`{"Action":"output","Package":"p","Test":"TestVM","Output":"    vm_test.go:12: METRIC name=vm.boot_s value=12.5 unit=s\n"}`,
		`{"Action":"output","Package":"p","Test":"TestVM/uefi","Output":"        vm_test.go:40: METRIC name=vm.uefi.deploy_s value=80 unit=s limit=70 target=60\n"}`,
		`{"Action":"output","Package":"p","Test":"TestVM","Output":"    vm_test.go:13: METRIC name=Bad value=1 unit=s\n"}`,
		`{"Action":"output","Package":"p","Test":"TestVM","Output":"    a line that mentions METRICS in passing\n"}`,
		`{"Action":"output","Package":"p","Output":"METRIC name=pkg.level value=1 unit=x\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestVM","Elapsed":3}`,
		`{"Action":"fail","Package":"p","Elapsed":3.1}`,
	}, "\n") + "\n"
	var plain, with, metrics bytes.Buffer
	if err := summarize(strings.NewReader(in), &plain, options{top: 2}); err != nil {
		t.Fatal(err)
	}
	if err := summarize(strings.NewReader(in), &with, options{top: 2, metrics: &metrics}); err != nil {
		t.Fatal(err)
	}
	if plain.String() != with.String() {
		t.Errorf("-metrics changed the summary:\n%s\nwithout it:\n%s", with.String(), plain.String())
	}
	want := "METRIC name=vm.boot_s value=12.5 unit=s package=p test=TestVM\n" +
		"METRIC name=vm.uefi.deploy_s value=80 unit=s limit=70 target=60 package=p test=TestVM/uefi\n" +
		"METRIC name=pkg.level value=1 unit=x package=p\n"
	if metrics.String() != want {
		t.Errorf("metrics:\n%s\nwant:\n%s", metrics.String(), want)
	}
}
