package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func rulesOf(t *testing.T, text string) []string {
	t.Helper()
	found, err := Check("x.md", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var r []string
	for _, f := range found {
		r = append(r, f.Rule)
	}
	return r
}

func TestRules(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string // rules that must fire; nil: none may
	}{
		// Dates.
		{"Measured on 2026-11-29 at main.", []string{"date"}},
		{"run of March 4, 2026", []string{"date"}},
		{"on 4 March the suite", []string{"date"}},
		{"as of Nov 2026", []string{"date"}},
		{"You may 3 times retry", nil},
		{"the 2026.1 series and Ironic 21.4.4", nil},
		{"a UUID 2026-11-29-aaaa", []string{"date"}},
		// Clock times.
		{"at 06:12-06:45 on the host", []string{"clock time"}},
		{"from 21:05:33 on", []string{"clock time"}},
		{"MAC 52:54:00:6d:05:01 and fe80::1", nil},
		{"`ironic_agent.dhcp=52:54:00:12:34:56`", nil},
		{"device 8:16 and 259:0", nil},
		{"http://10.0.0.1:6385/v1 and [::1]:9999", nil},
		{"ratio 16:9", nil},
		// Load figures.
		{"at load 12-15 the boot", []string{"load figure"}},
		{"with a load average of 3", []string{"load figure"}},
		{"the load of 7 made it slow", []string{"load figure"}},
		{"loads the modules, then load the agent", nil},
		{"Workload 3 finished", nil},
		// Timings.
		{"The whole suite took 33 min.", []string{"timing"}},
		{"it passed in 26 min 8 s on a new machine", []string{"timing"}},
		{"e2e/vm ran 1448 s", []string{"timing"}},
		{"finished in 4.2 s", []string{"timing"}},
		{"done in 12 minutes", []string{"timing"}},
		{"26m8s", []string{"timing"}},
		{"The agent retries after 10 s.", nil},
		{"heartbeats every 30 s by default", nil},
		{"the lookup runs for 300 s at most, then the agent completes within 10 s", nil},
		{"a timeout of 60 s", nil},
		{"lookup_timeout: seconds to keep retrying lookup", nil},
		{"`go test -run X -timeout 40m` took", nil},
		// First person.
		{"We measured it.", []string{"first person"}},
		{"with other VM tests of mine beside it", []string{"first person"}},
		{"today's run", []string{"first person"}},
		{"Tell us about your machine", []string{"first person"}},
		{"I ran it twice", []string{"first person"}},
		{"our fork", []string{"first person"}},
		{"direct I/O and I-cache", nil},
		{"a 250 us delay", nil},
		{"US keyboard, en_US", nil},
		{"the user, the mean, the myriad, welcome, ours_x", nil},
		{"`mkfs.vfat -n me` in a span", nil},
		{"Sources, hours, yours", nil},
		// Issue numbers.
		{"as issue 15 asked", []string{"issue number"}},
		{"(issues #3 and #4)", []string{"issue number"}},
		{"fixes #12", []string{"issue number"}},
		{"PCI slot #3 is empty", nil},
		// The escape hatch names one rule.
		{"at 06:12 <!-- doccheck: allow clock time -->", nil},
		{"we at 06:12 <!-- doccheck: allow clock time -->", []string{"first person"}},
	} {
		got := rulesOf(t, c.line+"\n")
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: rule %q did not fire (got %v)", c.line, w, got)
			}
		}
		if c.want == nil && len(got) > 0 {
			t.Errorf("%q: unexpected %v", c.line, got)
		}
	}
}

func TestCodeBlocks(t *testing.T) {
	doc := "text\n```\n$ go test ./... # we took 3 min\nstarted 2026-01-02\n```\nafter\n"
	found, err := Check("d.md", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Rule != "date" || found[0].Line != 4 {
		t.Errorf("code block: want only the date on line 4, got %v", found)
	}
}

func TestFindingFormat(t *testing.T) {
	found, err := Check("docs/g.md", strings.NewReader("one\nthe suite took 33 min today\n"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range found {
		lines = append(lines, f.String())
	}
	want := []string{"docs/g.md:2: timing: the suite took 33 min today", "docs/g.md:2: first person: the suite took 33 min today"}
	if !slices.Equal(lines, want) {
		t.Errorf("got %q, want %q", lines, want)
	}
}

func TestExcerptLongLine(t *testing.T) {
	line := strings.Repeat("é", 100) + " took 3 s " + strings.Repeat("ü", 100)
	found, _ := Check("x.md", strings.NewReader(line))
	if len(found) != 1 || !strings.HasPrefix(found[0].Text, "...") || !strings.HasSuffix(found[0].Text, "...") ||
		!strings.Contains(found[0].Text, "took 3 s") || !strings.ContainsRune(found[0].Text, 'é') {
		t.Errorf("excerpt %v", found)
	}
}

func TestReadmeBudgetAndFiles(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", strings.Repeat("line\n", readmeBudget))
	write("docs/guide.md", "fine\n")
	write("docs/performance.md", "Stamped 2026-12-01 21:00, load 3\n")
	files, err := defaultFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("files %v: want README.md and docs/guide.md", files)
	}
	var out strings.Builder
	if n, err := run(files, &out); err != nil || n != 0 {
		t.Errorf("at the budget: %d problems, %v: %s", n, err, out.String())
	}
	write("README.md", strings.Repeat("line\n", readmeBudget+1))
	out.Reset()
	if n, _ := run(files, &out); n != 1 || !strings.Contains(out.String(), "README.md:251: length: 251 lines, at most 250") {
		t.Errorf("over the budget: %d: %s", n, out.String())
	}
}
