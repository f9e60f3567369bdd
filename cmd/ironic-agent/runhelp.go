package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ironic-go/ironic-agent/agent/config"
)

// writeOptionHelp lists the flags of fs that are configuration options
// under their group headings, with a placeholder for the value, the kernel
// parameter and the default, then the remaining flags of fs under
// otherHeading. Options of no group (test fixtures) are left out; their
// flags still work.
func writeOptionHelp(w io.Writer, fs *flag.FlagSet, otherHeading string) {
	opts := config.Options()
	listed := map[string]bool{}
	for _, o := range opts {
		listed[o.Flag] = true
	}
	for _, g := range config.Groups() {
		fmt.Fprintf(w, "\n%s:\n", g)
		for _, o := range opts {
			if o.Group != g {
				continue
			}
			var notes []string
			if o.Kernel != "" {
				notes = append(notes, "kernel: "+o.Kernel)
			}
			switch {
			case o.Bool && o.Default == "true":
				notes = append(notes, "default true; --"+o.Flag+"=false turns it off")
			case !o.Bool && o.Default != "":
				notes = append(notes, "default "+o.Default)
			}
			writeFlagHelp(w, o.Flag, o.Placeholder, o.Help, notes)
		}
	}
	fmt.Fprintf(w, "\n%s:\n", otherHeading)
	fs.VisitAll(func(f *flag.Flag) {
		if listed[f.Name] {
			return
		}
		placeholder, usage := flag.UnquoteUsage(f)
		if isBoolFlag(f) {
			placeholder = ""
		}
		var notes []string
		if f.DefValue != "" && f.DefValue != "false" {
			notes = append(notes, "default "+f.DefValue)
		}
		writeFlagHelp(w, f.Name, placeholder, usage, notes)
	})
}

func writeFlagHelp(w io.Writer, name, placeholder, help string, notes []string) {
	line := "  --" + name
	if placeholder != "" {
		line += " " + placeholder
	}
	if len(notes) > 0 {
		help += " (" + strings.Join(notes, "; ") + ")"
	}
	fmt.Fprintf(w, "%s\n        %s\n", line, help)
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
