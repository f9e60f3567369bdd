// Command doccheck fails when the README or a guide in docs/ carries what
// goes stale: dates, clock times, load figures, timings of test runs in
// prose, first-person narration or internal issue numbers; and when the
// README grows past its budget. Measured figures belong in
// docs/performance.md, which tools/perfpage generates and stamps, so that
// page is not checked.
//
//	go run ./tools/doccheck             # README.md and docs/*.md below .
//	go run ./tools/doccheck FILE...     # these files only
//
// Each finding is printed as file:line: rule: text. A line that must
// state such a thing can carry <!-- doccheck: allow RULE --> (RULE as
// printed, e.g. "clock time").
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// readmeBudget is the most lines README.md may have: it is a front page,
// the guides in docs/ hold the rest.
const readmeBudget = 250

// generatedPages are docs/ pages written by a tool, with a generated
// stamp that names their date on purpose.
var generatedPages = []string{"performance.md"}

func main() {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	files := flag.Args()
	if len(files) == 0 {
		var err error
		if files, err = defaultFiles(*root); err != nil {
			fmt.Fprintln(os.Stderr, "doccheck:", err)
			os.Exit(2)
		}
	}
	problems, err := run(files, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(2)
	}
	if problems > 0 {
		fmt.Fprintf(os.Stderr, "doccheck: %d problems: move figures to docs/performance.md (generated from METRIC lines), dates and history to git\n", problems)
		os.Exit(1)
	}
}

// defaultFiles is README.md and docs/*.md but the generated pages.
func defaultFiles(root string) ([]string, error) {
	files := []string{filepath.Join(root, "README.md")}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		if !slices.Contains(generatedPages, filepath.Base(d)) {
			files = append(files, d)
		}
	}
	return files, nil
}

// run checks files, prints each finding to w and returns how many there
// were.
func run(files []string, w io.Writer) (int, error) {
	problems := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return problems, err
		}
		found, err := Check(f, strings.NewReader(string(data)))
		if err != nil {
			return problems, fmt.Errorf("%s: %w", f, err)
		}
		if filepath.Base(f) == "README.md" {
			if n := lineCount(data); n > readmeBudget {
				found = append(found, Finding{File: f, Line: n, Rule: "length", Text: fmt.Sprintf("%d lines, at most %d", n, readmeBudget)})
			}
		}
		for _, x := range found {
			fmt.Fprintln(w, x)
		}
		problems += len(found)
	}
	return problems, nil
}

func lineCount(b []byte) int {
	n := strings.Count(string(b), "\n")
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}
