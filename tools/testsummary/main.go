// Command testsummary reads `go test -json` on its standard input and
// writes what a plain `go test` of several packages shows (build errors,
// each package's result line, the whole output of every test that failed),
// then the slowest packages and tests of the run, so that a CI log says
// where the time went; ./test.sh runs each of its go test rounds through it:
//
//	go test -json ./... | testsummary [-top N] [-all]
//
// -all writes every test's output as it comes, as `go test -v` does. Lines
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
	flag.Parse()
	if flag.NArg() > 0 || *top < 0 {
		fmt.Fprintln(os.Stderr, "usage: go test -json ... | testsummary [-top N] [-all]")
		os.Exit(2)
	}
	if err := summarize(os.Stdin, os.Stdout, options{top: *top, all: *all}); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
}
