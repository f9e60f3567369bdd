package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/metric"
)

// benchmark is one section of the page: the metrics whose names start
// with prefix and a dot.
type benchmark struct {
	prefix, title, what, target string
	commands                    []string
}

// benchmarks are the sections, in page order. Metrics of another prefix
// get a section of their own after these, titled by the prefix.
var benchmarks = []benchmark{
	{
		prefix: "inventory", title: "Inventory",
		what: "`ironic-agent inventory` of the machine it runs on, from exec to exit: wall time, CPU time and peak RSS " +
			"from each child's rusage. The limits come from the same run: `lscpu`, `lsblk` and `ip`, the tools IPA " +
			"runs for the same facts (without its Python start-up), and a static Go hello-world, the floor of any " +
			"Go program's start. `inventory.init_ms` and `inventory.init_allocs` are what the binary's package " +
			"initialisers cost before `main` runs (`GODEBUG=inittrace=1`, the median of 11 starts); the script " +
			"also prints the five dearest initialisers.",
		commands: []string{"scripts/bench-inventory.sh 100"},
		target:   "under 25 ms of wall time and under 20 MiB peak RSS.",
	},
	{
		prefix: "image", title: "Image writing",
		what: "`ironic-agent write-image` of one disk image (half random bytes, a quarter base64 text, a quarter zeros) " +
			"served over loopback HTTP onto a loop device, sha256 verified and synced, as raw, qcow2 and zstd. The " +
			"limit is `curl | dd oflag=direct` of the same raw image in the same run; qcow2 is set beside " +
			"`qemu-img convert`, zstd beside `curl | zstd -d | dd`.",
		commands: []string{"scripts/bench-image.sh (as root)"},
		target:   "raw at 0.85 of `curl | dd` or better; qcow2 at 0.70 of raw or better.",
	},
	{
		prefix: "hash", title: "Image hashing",
		what: "The image writer's SHA-256 and SHA-512 (`deploy/image` BenchmarkImageHash) on 4 MiB buffers, in MB per " +
			"CPU second so that the machine's load does not move them: `agent` is what the agent runs without " +
			"`fips=1` (its own assembly, `internal/fastsha2`, on CPUs without AVX2), `fips_certified` FIPS mode with " +
			"the certified Go Cryptographic Module v1.0.0 the release links (GOFIPS140=certified), `fips_latest` FIPS " +
			"mode with the Go toolchain's current module; `native` on this CPU, `noext` as on a CPU without AVX2 and " +
			"SHA extensions such as QEMU's qemu64. The limit of a FIPS figure is the agent's on the same CPU setting.",
		commands: []string{"scripts/bench-hash.sh"},
	},
	{
		prefix: "ramdisk", title: "The ramdisk",
		what: "The kernel and initramfs `make ramdisk` builds (`cmd/mkramdisk`): Debian's kernel, the module " +
			"manifest with its firmware, the programs of the registry and the agent as `/init`; `ramdisk.arm64.*` " +
			"the same for arm64 (`make ramdisk ARCH=arm64`: Debian's arm64 kernel, gzip-compressed). IPA 13's ramdisk, " +
			"built from Debian's packages, is measured beside it by the side-by-side tests (IPA_SIDE_BY_SIDE=1).",
		commands: []string{"scripts/perf-page.sh"},
	},
	{
		prefix: "agent", title: "The agent binary",
		what:     "The static, stripped `ironic-agent` binary the ramdisk carries, as scripts/bench-inventory.sh builds it.",
		commands: []string{"scripts/bench-inventory.sh"},
	},
	{
		prefix: "vm", title: "VM scenarios",
		what: "The phases of the `e2e/vm` scenarios, each a QEMU machine driven by a real Ironic: inspection, cleaning, " +
			"deploy and the boots between them, from Ironic's request to the state it waits for, as the tests " +
			"measure them. They run under the race detector with the rest of the suite, so they move with the load; " +
			"the limits, measured in the same run, move with it. The limits (docs/testing.md, Benchmarks) are floors " +
			"measured by tests of their own, the `vm.floor.*` rows: a first heartbeat stands beside the same kernel and " +
			"initramfs booted in the same VM shape on the same firmware with a do-nothing init " +
			"(`internal/testbed/guest/bootfloor`), timed the same way, and the uptime the agent starts at beside that " +
			"init's; cleaning and the BIOS deploy stand beside the same flow through the same Ironic with a stand-in agent that " +
			"heartbeats on the agent's schedule and answers every command at once (`internal/testbed/standin`), the " +
			"pace of Ironic's own polling; the deploy's write throughput stands beside `curl | dd oflag=direct` done " +
			"in the same VM, from the same image server to the same disk, by a deploy step " +
			"(`internal/testbed/guest/fetchdirect`, since the ramdisk carries neither curl nor dd), and the same " +
			"write with `fips=1` (`vm.deployfipsbios.*`, SHA-256 and SHA-512 by the standard library's FIPS module, " +
			"a run with E2E_VM_SLOW=1) beside that write without it. A limit named " +
			"by a figure comes from the same metrics file only; \"not measured\" says that run lacked it. Other " +
			"phases have no limit yet. `vm.arm64.boot_to_inventory_s` is the arm64 ramdisk on QEMU's emulated " +
			"`virt` machine with AAVMF (`e2e/ramdisk`, E2E_VM_SLOW=1), from QEMU's start to the inventory's upload, " +
			"and `vm.arm64.boot_to_heartbeat_s` the same machine's boot through Ironic's virtual media for cleaning " +
			"(`TestVMArm64Lifecycle`, E2E_VM_SLOW=1), from QEMU's start to the first heartbeat, as the amd64 " +
			"`first_heartbeat_s` rows are timed. Its row stands after amd64's UEFI first heartbeat " +
			"(`vm.deployuefi.deploy_first_heartbeat_s`) and its limit is its own floor, " +
			"`vm.floor.kernel_boot_arm64_s`, measured by the same test: a whole other instruction set emulated, " +
			"so not comparable with the amd64 boots. IPA 13's ramdisk stands beside ours in the `vm.ipasidebyside*` " +
			"rows (ramdisk size, inspection, first heartbeat, cleaning) and the `vm.ipadeploy.*` rows (each phase, and " +
			"the image's way from the server to the disk as each agent logs it: IPA's download and write, ours' " +
			"streamed write, of the same 1 GiB image): the same machine through the same Ironic, one agent after " +
			"the other (IPA_SIDE_BY_SIDE=1). A slow run's `go test -v` output given to " +
			"scripts/perf-page.sh adds these rows.",
		commands: []string{"./test.sh (as root)", "go test -race -run 'TestVM' ./e2e/vm/ (as root)"},
	},
}

// source is one metrics file: a round of ./test.sh (tools/testsummary
// -metrics) or a benchmark script's output.
type source struct {
	name     string
	modified time.Time
	metrics  []metric.Metric
	// skipped counts lines that carry METRIC but do not parse.
	skipped int
}

// readSource reads the METRIC lines of r; other lines are ignored, so a
// script's whole output can be given.
func readSource(name string, r io.Reader) (source, error) {
	s := source{name: name}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, metric.Prefix) {
			continue
		}
		if m, ok := metric.Parse(line); ok {
			s.metrics = append(s.metrics, m)
		} else {
			s.skipped++
		}
	}
	return s, sc.Err()
}

func readFile(path string) (source, error) {
	f, err := os.Open(path)
	if err != nil {
		return source{}, err
	}
	defer f.Close()
	s, err := readSource(filepath.Base(path), f)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	if st, err := f.Stat(); err == nil {
		s.modified = st.ModTime()
	}
	return s, nil
}

// stamp says where and when the figures were measured.
type stamp struct {
	Commit string
	Date   time.Time
	CPU    string
	Cores  int
	Memory string
	Kernel string
	// Load is the load average when the page was written, right after
	// the benchmarks ran: figures of a busy machine are slower.
	Load string
}

// entry is the current value of one metric name.
type entry struct {
	m      metric.Metric
	source string
}

// limitOf is the limit set beside e: its limit= field or, when the line
// names its limit's metric (limit_from=), that metric's last value in the
// same source, the same run, since a bound from another run bounds
// nothing. ok is false when the named metric is not in that source; an
// error says the named metric has another unit.
func limitOf(e entry, sources []source) (v float64, ok bool, err error) {
	from := e.m.Get(metric.LimitFromKey)
	if from == "" {
		return e.m.Limit, true, nil
	}
	i := slices.IndexFunc(sources, func(s source) bool { return s.name == e.source })
	if i < 0 {
		return math.NaN(), false, nil
	}
	found := false
	var lim metric.Metric
	for _, m := range sources[i].metrics {
		if m.Name == from {
			lim, found = m, true
		}
	}
	if !found {
		return math.NaN(), false, nil
	}
	if lim.Unit != e.m.Unit {
		return math.NaN(), false, fmt.Errorf("%s: %s %s is in %s, the figure in %s", e.source, metric.LimitFromKey, from, lim.Unit, e.m.Unit)
	}
	return lim.Value, true, nil
}

// latest picks the value of each name, in the order names first appear:
// from the first source that has the name (sources come in order of
// precedence: ./test.sh's main round before its rounds against other
// Ironic series, which add only the scenarios the main round skips), and
// there the last line (a rerun).
func latest(sources []source) (names []string, byName map[string]entry) {
	byName = map[string]entry{}
	for _, s := range sources {
		for _, m := range s.metrics {
			e, ok := byName[m.Name]
			if !ok {
				names = append(names, m.Name)
			} else if e.source != s.name {
				continue
			}
			byName[m.Name] = entry{m: m, source: s.name}
		}
	}
	return names, byName
}

func prefixOf(name string) string {
	p, _, _ := strings.Cut(name, ".")
	return p
}

func withUnit(v float64, unit string) string {
	if math.IsNaN(v) {
		return ""
	}
	return metric.Number(v) + " " + unit
}

// render writes the page.
func render(w io.Writer, sources []source, st stamp) error {
	names, byName := latest(sources)
	var b strings.Builder
	b.WriteString("# Performance\n\n")
	b.WriteString("<!-- Generated by tools/perfpage from METRIC lines (scripts/perf-page.sh); do not edit. -->\n\n")
	b.WriteString("Every figure below is printed by a benchmark or a test as a `METRIC` line " +
		"(`internal/testbed/metric`) and collected by `scripts/perf-page.sh`; none is typed by hand. " +
		"A limit is the same quantity measured in the same run by the bound the figure is compared with. " +
		"Earlier figures are in this page's git history.\n\n")
	fmt.Fprintf(&b, "Measured at commit `%s`, %s, on %s (%d cores, %s memory), Linux %s; load average %s when the page was written.\n\n",
		st.Commit, st.Date.UTC().Format("2006-01-02 15:04 MST"), st.CPU, st.Cores, st.Memory, st.Kernel, st.Load)
	if len(sources) > 0 {
		b.WriteString("Sources:\n\n")
		for _, s := range sources {
			fmt.Fprintf(&b, "- `%s`: %d figures", s.name, len(s.metrics))
			if !s.modified.IsZero() {
				fmt.Fprintf(&b, ", written %s", s.modified.UTC().Format("2006-01-02 15:04 MST"))
			}
			if s.skipped > 0 {
				fmt.Fprintf(&b, ", %d malformed METRIC lines left out", s.skipped)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}

	if err := renderHeadlines(&b, byName, sources); err != nil {
		return err
	}
	sections := slices.Clone(benchmarks)
	for _, n := range names {
		p := prefixOf(n)
		if !slices.ContainsFunc(sections, func(s benchmark) bool { return s.prefix == p }) {
			sections = append(sections, benchmark{prefix: p, title: "`" + p + "`"})
		}
	}
	for _, sec := range sections {
		fmt.Fprintf(&b, "## %s\n\n", sec.title)
		if sec.what != "" {
			b.WriteString(sec.what + "\n\n")
		}
		if len(sec.commands) > 0 {
			fmt.Fprintf(&b, "Run: `%s`\n\n", strings.Join(sec.commands, "`, or `"))
		}
		if sec.target != "" {
			fmt.Fprintf(&b, "Target: %s\n\n", sec.target)
		}
		var rows []entry
		withTest := false
		for _, n := range names {
			if prefixOf(n) == sec.prefix {
				rows = append(rows, byName[n])
				withTest = withTest || byName[n].m.Get("test") != ""
			}
		}
		if len(rows) == 0 {
			b.WriteString("Not measured in this run.\n\n")
			continue
		}
		rows = besideOrder(rows)
		b.WriteString("| figure | value | limit (same run) | target |")
		if withTest {
			b.WriteString(" test |")
		}
		b.WriteString("\n| --- | --: | --: | --: |")
		if withTest {
			b.WriteString(" --- |")
		}
		b.WriteString("\n")
		for _, r := range rows {
			m := r.m
			lim, ok, err := limitOf(r, sources)
			if err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			limit := withUnit(lim, m.Unit)
			if !ok {
				limit = "not measured"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |", m.Name, withUnit(m.Value, m.Unit), limit, withUnit(m.Target, m.Unit))
			if withTest {
				if t := m.Get("test"); t != "" {
					fmt.Fprintf(&b, " `%s` |", t)
				} else {
					b.WriteString("  |")
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, strings.TrimSuffix(b.String(), "\n"))
	return err
}

// headline is a figure the README names, with IPA 13's figure of the same
// quantity in the same machine where a side-by-side run measured it.
type headline struct{ label, figure, ipa string }

// headlines are the README's figures, in its order.
var headlines = []headline{
	{"`ironic-agent inventory`, wall time (median)", "inventory.wall_ms_median", ""},
	{"ramdisk: kernel and initramfs", "ramdisk.total_mib", "vm.ipasidebyside_bios.ipa.ramdisk_mib"},
	{"boot to the first heartbeat (SeaBIOS, from QEMU's start, cleaning through Ironic)",
		"vm.ipasidebyside_bios.ours.first_heartbeat_s", "vm.ipasidebyside_bios.ipa.first_heartbeat_s"},
	{"deploy: a 1 GiB raw image from HTTP to the disk", "vm.ipadeploy.ours.raw.image_mb_s", "vm.ipadeploy.ipa.raw.image_mb_s"},
	{"deploy: the image write, beside `curl` into `dd oflag=direct` in the same VM", "vm.deploythroughputbios.write_image_mb_s", ""},
}

// renderHeadlines writes the table of the README's figures: each row's
// value, limit and IPA's figure come from the rows below it.
func renderHeadlines(b *strings.Builder, byName map[string]entry, sources []source) error {
	b.WriteString("## Headline figures\n\n")
	b.WriteString("The figures the README names, taken from the tables below (the row's name is the figure's). " +
		"IPA 13's figure is its ramdisk's in the same machine through the same Ironic, from the side-by-side tests " +
		"(IPA_SIDE_BY_SIDE=1).\n\n")
	b.WriteString("| figure | ours | limit (same run) | IPA 13 |\n| --- | --: | --: | --: |\n")
	for _, h := range headlines {
		ours, limit, ipa := "not measured", "", ""
		if e, ok := byName[h.figure]; ok {
			ours = withUnit(e.m.Value, e.m.Unit)
			lim, ok, err := limitOf(e, sources)
			if err != nil {
				return fmt.Errorf("%s: %w", h.figure, err)
			}
			if limit = withUnit(lim, e.m.Unit); !ok {
				limit = "not measured"
			}
		}
		if h.ipa != "" {
			ipa = "not measured"
			if e, ok := byName[h.ipa]; ok {
				ipa = withUnit(e.m.Value, e.m.Unit)
			}
		}
		fmt.Fprintf(b, "| %s (`%s`) | %s | %s | %s |\n", h.label, h.figure, ours, limit, ipa)
	}
	b.WriteString("\n")
	return nil
}

// besideOrder moves each row whose line names another row of the section
// (metric.BesideKey: the same quantity on another architecture) to just
// after that row, in the order they came; a row naming one that is not in
// the section, or one that names another itself, keeps its place.
func besideOrder(rows []entry) []entry {
	in := map[string]bool{}
	for _, r := range rows {
		in[r.m.Name] = true
	}
	anchor := func(r entry) string {
		if b := r.m.Get(metric.BesideKey); in[b] {
			return b
		}
		return ""
	}
	after := map[string][]entry{}
	for _, r := range rows {
		if a := anchor(r); a != "" {
			after[a] = append(after[a], r)
		}
	}
	out := make([]entry, 0, len(rows))
	for _, r := range rows {
		a := anchor(r)
		if a != "" {
			if i := slices.IndexFunc(rows, func(x entry) bool { return x.m.Name == a }); anchor(rows[i]) == "" {
				continue
			}
		}
		out = append(out, r)
		if a == "" {
			out = append(out, after[r.m.Name]...)
		}
	}
	return out
}
