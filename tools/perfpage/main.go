// Command perfpage writes docs/performance.md from metrics files: the
// METRIC lines (internal/testbed/metric) that ./test.sh's rounds collect
// ($METRICS_DIR/*.metrics) and that the benchmark scripts print. Each
// benchmark gets a section saying what it measures, how to run it and its
// target, and one table of the latest figures; the page is stamped with
// the commit, the date and the machine, all read here, none typed.
//
//	go run ./tools/perfpage [-o docs/performance.md] FILE...
//
// A name found in several files takes its value from the first file that
// has it, so give the files in order of precedence.
// scripts/perf-page.sh runs the benchmarks and then this.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func main() {
	out := flag.String("o", "docs/performance.md", "the page to write")
	commit := flag.String("commit", "", "commit to stamp (default: git's HEAD, with -dirty for uncommitted changes)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: perfpage [-o PAGE] [-commit REV] METRICS_FILE...")
		os.Exit(2)
	}
	var sources []source
	for _, f := range flag.Args() {
		s, err := readFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "perfpage:", err)
			os.Exit(1)
		}
		sources = append(sources, s)
	}
	st := machine()
	st.Commit = *commit
	if st.Commit == "" {
		st.Commit = gitCommit(*out)
	}
	var b bytes.Buffer
	if err := render(&b, sources, st); err != nil {
		fmt.Fprintln(os.Stderr, "perfpage:", err)
		os.Exit(1)
	}
	b.WriteString("\n")
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "perfpage:", err)
		os.Exit(1)
	}
	n := 0
	for _, s := range sources {
		n += len(s.metrics)
	}
	fmt.Fprintf(os.Stderr, "perfpage: wrote %s (%d figures from %d files)\n", *out, n, len(sources))
}

// machine reads the stamp's machine fields from /proc.
func machine() stamp {
	st := stamp{Date: time.Now(), Cores: runtime.NumCPU(), CPU: "an unknown CPU", Memory: "unknown", Kernel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				st.CPU = strings.Join(strings.Fields(v), " ")
				break
			}
		}
	}
	st.Load = "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			st.Load = strings.Join(f[:3], " ")
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		st.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for l := range strings.Lines(string(b)) {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				if kib, err := strconv.ParseFloat(f[1], 64); err == nil {
					st.Memory = strconv.FormatFloat(kib/(1<<20), 'f', 1, 64) + " GiB"
				}
			}
		}
	}
	return st
}

// gitCommit is HEAD's short hash, with -dirty when files other than the
// page itself have uncommitted changes; "unknown" outside a git tree.
func gitCommit(page string) string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)"+page).Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += "-dirty"
	}
	return c
}
