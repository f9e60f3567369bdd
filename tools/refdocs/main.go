// Command refdocs writes the generated parts of the reference pages in
// docs/ from the code: every agent option, the lookup config keys, the
// init's kernel parameters, the ramdisk's kernel flavours and module
// subtrees and exclusions (docs/configuration.md), and the step tables
// (docs/steps.md). Only the text between a page's
// <!-- BEGIN GENERATED name --> and <!-- END GENERATED name --> markers is
// rewritten; prose outside them is left alone. A page that does not exist
// yet is created from a skeleton.
//
//	go run ./tools/refdocs          # from the repository root
//	go run ./tools/refdocs -check   # exit 1, naming each page that differs
//
// The package's test runs the check, so go test ./... fails when a page
// is out of date.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	root := flag.String("root", ".", "repository root")
	check := flag.Bool("check", false, "only report the pages that differ from the code")
	flag.Parse()
	pages, err := render(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "refdocs:", err)
		os.Exit(1)
	}
	stale := 0
	for _, p := range pages {
		if p.old == p.new {
			continue
		}
		stale++
		if *check {
			fmt.Fprintf(os.Stderr, "refdocs: %s differs from the code\n", p.path)
			continue
		}
		if err := os.WriteFile(p.path, []byte(p.new), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "refdocs:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "refdocs: wrote %s\n", p.path)
	}
	if *check && stale > 0 {
		fmt.Fprintln(os.Stderr, "refdocs: run go run ./tools/refdocs")
		os.Exit(1)
	}
}
