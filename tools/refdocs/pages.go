package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// page is one docs file: its text on disk ("" when missing) and with its
// generated sections rewritten.
type page struct {
	path     string
	old, new string
}

func beginMarker(name string) string { return "<!-- BEGIN GENERATED " + name + " -->" }
func endMarker(name string) string   { return "<!-- END GENERATED " + name + " -->" }

// replaceSection puts body between the markers named name in doc.
func replaceSection(doc, name, body string) (string, error) {
	begin, end := beginMarker(name), endMarker(name)
	i := strings.Index(doc, begin)
	if i < 0 {
		return "", fmt.Errorf("no %s marker", begin)
	}
	if strings.Count(doc, begin) > 1 {
		return "", fmt.Errorf("%s appears twice", begin)
	}
	j := strings.Index(doc[i:], end)
	if j < 0 {
		return "", fmt.Errorf("%s without %s after it", begin, end)
	}
	j += i
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	return doc[:i] + begin + "\n" + body + doc[j:], nil
}

// skeleton is a page's text before its first generation: prose and empty
// generated sections.
func skeleton(prose string, sections ...string) string {
	var b strings.Builder
	b.WriteString(prose)
	for _, s := range sections {
		fmt.Fprintf(&b, "%s\n%s\n\n", beginMarker(s), endMarker(s))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

const generatedNote = "The tables between the `GENERATED` markers are written from the code by `go run ./tools/refdocs`, " +
	"and `go test ./tools/refdocs` fails when they differ from it: change the code, then regenerate.\n\n"

var configurationSkeleton = skeleton(`# Configuration reference

The agent takes its options from three places; each later one wins:

1. the kernel command line (`+"`ipa-*`"+` parameters);
2. the INI config files (section `+"`[DEFAULT]`"+`, with Ironic Python Agent's option names);
3. the flags of `+"`ironic-agent run`"+`.

After lookup, the `+"`config`"+` of Ironic's reply may override a few of them. The ramdisk's
init (PID 1) reads kernel parameters of its own, `+"`ironic_agent.*`"+`.

`+generatedNote+`## Agent options

`, "options") + `
## Ironic's lookup config

The keys of the lookup reply's ` + "`config`" + ` the agent applies. Other keys are logged as unused.

` + skeleton("", "lookup-config") + `
## Init parameters

Read by the ramdisk's init before the agent starts.

` + skeleton("", "init-params") + `

## Ramdisk build

The kernel flavours ` + "`make ramdisk`" + ` can build with, and the kernel modules it carries
(` + "`internal/ramdisk/modules.txt`" + `).

` + skeleton("", "kernel-flavours") + `
` + skeleton("", "module-subtrees")

var stepsSkeleton = skeleton(`# Steps

The steps the agent offers Ironic through its generic hardware manager, as `+"`get_clean_steps`"+`,
`+"`get_deploy_steps`"+` and `+"`get_service_steps`"+` return them: IPA 13's tables with the same names,
interfaces, priorities and arguments. `+"`inject_files`"+`' priority is option
`+"`inject_files_priority`"+`. Executable steps an operator adds to `+"`steps_dir`"+` come on top.

`+generatedNote, "steps")

// render returns each reference page with its generated sections from
// the code below root.
func render(root string) ([]page, error) {
	options := optionsSection()
	lookup, err := lookupSection(root)
	if err != nil {
		return nil, err
	}
	steps, err := stepsSection(root)
	if err != nil {
		return nil, err
	}
	specs := []struct {
		file     string
		skeleton string
		sections [][2]string
	}{
		{"configuration.md", configurationSkeleton, [][2]string{{"options", options}, {"lookup-config", lookup}, {"init-params", initSection()}, {"kernel-flavours", kernelSection()}, {"module-subtrees", modulesSection()}}},
		{"steps.md", stepsSkeleton, [][2]string{{"steps", steps}}},
	}
	var pages []page
	for _, s := range specs {
		p := page{path: filepath.Join(root, "docs", s.file)}
		b, err := os.ReadFile(p.path)
		switch {
		case err == nil:
			p.old = string(b)
			p.new = p.old
		case errors.Is(err, os.ErrNotExist):
			p.new = s.skeleton
		default:
			return nil, err
		}
		for _, sec := range s.sections {
			if p.new, err = replaceSection(p.new, sec[0], sec[1]); err != nil {
				return nil, fmt.Errorf("%s: %w", p.path, err)
			}
		}
		pages = append(pages, p)
	}
	return pages, nil
}
