package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
)

// cell escapes text for one Markdown table cell: the pipe, and the
// characters Markdown would take for escapes or emphasis.
func cell(s string) string {
	return cellEscaper.Replace(s)
}

var cellEscaper = strings.NewReplacer("|", `\|`, "\n", " ", `\`, `\\`, "*", `\*`)

// codeCell is code(s) escaped for a table cell: inside backticks only the
// pipe needs it.
func codeCell(s string) string {
	return strings.ReplaceAll(code(s), "|", `\|`)
}

// code is s in backticks, or "" for an empty value.
func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}

// optionsSection is every agent option, grouped under run --help's
// headings, then the config files read when none is named.
func optionsSection() string {
	var b strings.Builder
	byGroup := map[string][]config.Option{}
	for _, o := range config.Options() {
		byGroup[o.Group] = append(byGroup[o.Group], o)
	}
	groups := config.Groups()
	headings := map[string]string{}
	if len(byGroup[""]) > 0 {
		groups = append(groups, "")
		headings[""] = "Test fixtures (left out of `run --help`)"
	}
	for _, g := range groups {
		h := headings[g]
		if h == "" {
			h = g
		}
		fmt.Fprintf(&b, "### %s\n\n", h)
		b.WriteString("| option (INI: `[DEFAULT]` unless another section is named) | flag | kernel parameter | default | meaning |\n")
		b.WriteString("| --- | --- | --- | --- | --- |\n")
		for _, o := range byGroup[g] {
			flag := "--" + o.Flag
			if o.Placeholder != "" {
				flag += " " + o.Placeholder
			}
			name := code(o.Name)
			if !strings.HasPrefix(o.INI, "[DEFAULT] ") {
				name = code(o.INI)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, codeCell(flag), code(o.Kernel), codeCell(o.Default), cell(o.Help))
		}
		b.WriteString("\n")
	}
	b.WriteString("### Config files\n\n")
	b.WriteString("Without `--config-file` or `--config-dir`, the agent reads those of these that exist, in this order:\n\n")
	for _, f := range config.DefaultConfigFiles() {
		fmt.Fprintf(&b, "- `%s`\n", f)
	}
	for _, d := range config.DefaultConfigDirs() {
		fmt.Fprintf(&b, "- every `*.conf` file in `%s`, sorted by name\n", d)
	}
	return b.String()
}

// lookupKeys describes each key of a lookup reply's config the agent
// applies. lookupSection fails when a key the agent decodes is missing
// here or a key here is no longer decoded, so the two lists stay one.
var lookupKeys = map[string]string{
	"heartbeat_timeout":              "Seconds Ironic waits for a heartbeat; the agent sends the next one after 30 to 60% of it. Required (or the reply's top-level `heartbeat_timeout`).",
	"agent_token":                    "The token every later call must carry, when Ironic hands it out at lookup rather than through `ipa-agent-token`.",
	"agent_token_required":           "True: a lookup that brings no token is logged as an error, as option `agent_token_required`.",
	"disable_deep_image_inspection":  "Overrides option `disable_deep_image_inspection`.",
	"permitted_image_formats":        "Overrides option `permitted_image_formats`; a list or a comma-separated string.",
	"enable_bios_bootloader_install": "True switches option `enable_bios_bootloader_install` on; false leaves the option as configured.",
	"agent_md5_checksum_enable":      "Overrides option `md5_enabled`.",
	"agent_skip_bmc_detect":          "True: the inventory leaves out the BMC addresses (no IPMI calls).",
	"tls_min_version":                "Overrides option `tls_min_version` for the API server and every outgoing connection; a value the agent cannot honour is logged and ignored.",
	"tls_cipher_suites":              "Overrides option `tls_cipher_suites`, as `tls_min_version`.",
}

// lookupConfigDir is the package whose ParseLookupConfig decodes a lookup
// reply's config, relative to the repository root.
const lookupConfigDir = "agent/ironic"

// decodedLookupKeys returns the case labels of the switch in
// ParseLookupConfig: the keys the agent applies, in source order.
func decodedLookupKeys(root string) ([]string, error) {
	dir := filepath.Join(root, lookupConfigDir)
	fset := token.NewFileSet()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "ParseLookupConfig" || fn.Recv != nil {
				continue
			}
			var keys []string
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				cc, ok := n.(*ast.CaseClause)
				if !ok {
					return true
				}
				for _, x := range cc.List {
					if lit, ok := x.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if k, err := strconv.Unquote(lit.Value); err == nil {
							keys = append(keys, k)
						}
					}
				}
				return true
			})
			if len(keys) == 0 {
				return nil, fmt.Errorf("%s: ParseLookupConfig has no string cases", dir)
			}
			return keys, nil
		}
	}
	return nil, fmt.Errorf("%s: no func ParseLookupConfig", dir)
}

func lookupSection(root string) (string, error) {
	keys, err := decodedLookupKeys(root)
	if err != nil {
		return "", err
	}
	var missing, stale []string
	for _, k := range keys {
		if lookupKeys[k] == "" {
			missing = append(missing, k)
		}
	}
	for k := range lookupKeys {
		if !slices.Contains(keys, k) {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	if len(missing) > 0 || len(stale) > 0 {
		return "", fmt.Errorf("lookup config keys: describe %v in tools/refdocs lookupKeys; drop %v from it (%s ParseLookupConfig decodes %v)",
			missing, stale, lookupConfigDir, keys)
	}
	var b strings.Builder
	b.WriteString("| key | effect |\n| --- | --- |\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "| `%s` | %s |\n", k, cell(lookupKeys[k]))
	}
	return b.String(), nil
}

func initSection() string {
	var b strings.Builder
	b.WriteString("| kernel parameter | default | meaning |\n| --- | --- | --- |\n")
	for _, p := range rdinit.Params() {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", p.Name, codeCell(p.Default), cell(p.Meaning))
	}
	return b.String()
}

// kernelSection is the kernel flavours the ramdisk build offers.
func kernelSection() string {
	var b strings.Builder
	b.WriteString("| `make ramdisk KERNEL=`, `mkramdisk -kernel`, `RAMDISK_KERNEL=` | Debian suites (kernel and firmware) | the kernel | kernel + initramfs at most |\n| --- | --- | --- | --- |\n")
	for _, f := range ramdisk.KernelFlavours() {
		name := code(f.Name)
		if f.Name == ramdisk.DefaultKernelFlavour {
			name += " (default)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d MiB |\n", name, code(strings.Join(f.Suites, " ")), cell(f.About), f.Budget>>20)
	}
	return b.String()
}

// modulesSection is what modules.txt takes (its subtrees) and leaves out
// (its exclusions), with the reasons.
func modulesSection() string {
	var b strings.Builder
	b.WriteString("Subtrees taken (every module below, minus the exclusions):\n\n| group | subtree of `lib/modules/<version>` | what |\n| --- | --- | --- |\n")
	for _, e := range ramdisk.Manifest() {
		if e.Dir != "" {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(e.Group), code(e.Dir), cell(e.Comment))
		}
	}
	b.WriteString("\nLeft out (a path: every module below it; else a module name pattern):\n\n| excluded | why |\n| --- | --- |\n")
	for _, e := range ramdisk.Manifest() {
		if e.Exclude != "" {
			fmt.Fprintf(&b, "| %s | %s |\n", codeCell(e.Exclude), cell(e.Comment))
		}
	}
	fmt.Fprintf(&b, "\nThe kernel and the initramfs together must stay within the kernel flavour's limit (%d MiB for the stable releases' kernels, see above), or the build fails.\n", ramdisk.SizeBudget>>20)
	return b.String()
}

// stepLists is the JSON of agent/testdata/generic-steps.golden.json (the
// steps the agent lists, as Ironic receives them; the agent's own test
// keeps it true) and of ipa13-generic-steps.json (IPA 13's tables).
type stepLists struct {
	Clean   []step `json:"clean_steps"`
	Deploy  []step `json:"deploy_steps"`
	Service []step `json:"service_steps"`
}

type step struct {
	Step      string `json:"step"`
	Priority  int    `json:"priority"`
	Interface string `json:"interface"`
	Abortable *bool  `json:"abortable"`
	Argsinfo  map[string]struct {
		Description string `json:"description"`
		Required    bool   `json:"required"`
	} `json:"argsinfo"`
}

const (
	stepsGolden = "agent/testdata/generic-steps.golden.json"
	stepsIPA13  = "agent/testdata/ipa13-generic-steps.json"
)

func readSteps(path string) (stepLists, error) {
	var l stepLists
	b, err := os.ReadFile(path)
	if err != nil {
		return l, err
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

func stepsTable(b *strings.Builder, steps []step) {
	b.WriteString("| step | interface | priority | abortable | arguments |\n| --- | --- | --- | --- | --- |\n")
	for _, s := range steps {
		ab := "(not sent)"
		if s.Abortable != nil {
			ab = strconv.FormatBool(*s.Abortable)
		}
		var args []string
		names := make([]string, 0, len(s.Argsinfo))
		for n := range s.Argsinfo {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			a := s.Argsinfo[n]
			req := "optional"
			if a.Required {
				req = "required"
			}
			args = append(args, fmt.Sprintf("`%s` (%s): %s", n, req, a.Description))
		}
		fmt.Fprintf(b, "| `%s` | %s | %d | %s | %s |\n", s.Step, s.Interface, s.Priority, ab, cell(strings.Join(args, "<br>")))
	}
}

func stepsSection(root string) (string, error) {
	ours, err := readSteps(filepath.Join(root, stepsGolden))
	if err != nil {
		return "", err
	}
	ipa, err := readSteps(filepath.Join(root, stepsIPA13))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, l := range []struct {
		title     string
		ours, ipa []step
	}{{"Clean steps", ours.Clean, ipa.Clean}, {"Deploy steps", ours.Deploy, ipa.Deploy}, {"Service steps", ours.Service, ipa.Service}} {
		fmt.Fprintf(&b, "### %s\n\n", l.title)
		stepsTable(&b, l.ours)
		var absent []string
		for _, s := range l.ipa {
			if !slices.ContainsFunc(l.ours, func(o step) bool { return o.Step == s.Step && o.Interface == s.Interface }) {
				absent = append(absent, "`"+s.Step+"`")
			}
		}
		if len(absent) > 0 {
			fmt.Fprintf(&b, "\nIn IPA 13's list but not offered: %s.\n", strings.Join(absent, ", "))
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
