// Command testsummary reads `go test -json` on its standard input and
// writes what a plain `go test` of several packages shows (build errors,
// each package's result line, the whole output of every test that failed),
// then the slowest packages and tests of the run, so that a CI log says
// where the time went, and last the first lines of each failed test's last
// log entries, so that its end says why they failed; ./test.sh runs each of its go test rounds through it:
//
//	go test -json ./... | testsummary [-top N] [-all] [-metrics FILE]
//
// -all writes every test's output as it comes, as `go test -v` does.
// -metrics FILE writes the METRIC lines the tests logged
// (internal/testbed/metric) to FILE, one a line with the package and test
// added, for tools/perfpage. Lines
// that are not go test's JSON are written as they are. The exit status is
// 0 unless reading or writing fails: the tests' own status is go test's
// (bash's pipefail).
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	top := flag.Int("top", 10, "how many of the slowest packages and tests to list")
	all := flag.Bool("all", false, "write every test's output, not only that of the tests that failed")
	metricsFile := flag.String("metrics", "", "write the tests' METRIC lines to this `file`")
	flag.Parse()
	if flag.NArg() > 0 || *top < 0 {
		fmt.Fprintln(os.Stderr, "usage: go test -json ... | testsummary [-top N] [-all] [-metrics FILE]")
		os.Exit(2)
	}
	opts := options{top: *top, all: *all}
	var mf *os.File
	if *metricsFile != "" {
		var err error
		if mf, err = os.Create(*metricsFile); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(1)
		}
		opts.metrics = mf
	}
	err := summarize(os.Stdin, os.Stdout, opts)
	if mf != nil {
		if cerr := mf.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
}
