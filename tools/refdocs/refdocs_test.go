package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/agent/ironic"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/rescue"
)

// TestDocsMatchCode is the golden test of the generated reference pages.
func TestDocsMatchCode(t *testing.T) {
	pages, err := render("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if p.old == "" {
			t.Errorf("%s is missing: run go run ./tools/refdocs", p.path)
			continue
		}
		if p.old != p.new {
			t.Errorf("%s differs from the code: run go run ./tools/refdocs (from the repository root) and commit the result\n%s",
				p.path, firstDifference(p.old, p.new))
		}
	}
}

// firstDifference shows the first line that differs, for the failure
// message.
func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + itoa(i+1) + ":\n  on disk:   " + x + "\n  generated: " + y
		}
	}
	return ""
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// Every option is on the page once, with its flag and kernel parameter.
func TestEveryOptionListed(t *testing.T) {
	s := optionsSection()
	for _, o := range config.Options() {
		name := o.Name
		if !strings.HasPrefix(o.INI, "[DEFAULT] ") {
			name = o.INI // an option IPA keeps in a section of its own
		}
		if n := strings.Count(s, "| `"+name+"` |"); n != 1 {
			t.Errorf("option %s listed %d times", name, n)
		}
		if o.Kernel != "" && !strings.Contains(s, "`"+o.Kernel+"`") {
			t.Errorf("kernel parameter %s missing", o.Kernel)
		}
	}
}

// The keys the page lists are those the agent's decoder takes, checked by
// calling it rather than reading its source.
func TestLookupKeysAreDecoded(t *testing.T) {
	keys, err := decodedLookupKeys("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]any{"some_key_of_a_newer_ironic": 1}
	for _, k := range keys {
		doc[k] = nil
	}
	b, _ := json.Marshal(doc)
	c, err := ironic.ParseLookupConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Unused, []string{"some_key_of_a_newer_ironic"}) {
		t.Errorf("keys read from the source %v; the decoder leaves unused %v", keys, c.Unused)
	}
}

// Every ironic_agent.* parameter the init's package names is in its table.
func TestInitParamsComplete(t *testing.T) {
	var names []string
	for _, p := range rdinit.Params() {
		names = append(names, p.Name)
	}
	for _, n := range []string{rdinit.ParamCommand, rdinit.ParamExit, rdinit.ParamUpload, rdinit.ParamUploadDir, rdinit.ParamDHCP,
		rdinit.ParamDHCPTimeout, rdinit.ParamModules, rdinit.ParamDebug, rdinit.ParamModuleJobs, rdinit.ParamIPv6,
		rdinit.ParamNetworkData, rdinit.ParamPublisherID, rescue.ParamSSHKey, rescue.ParamRootPassword} {
		if !slices.Contains(names, n) {
			t.Errorf("%s missing from rdinit.Params", n)
		}
	}
}

func TestReplaceSection(t *testing.T) {
	doc := "intro\n" + beginMarker("a") + "\nold\nlines\n" + endMarker("a") + "\nprose\n"
	got, err := replaceSection(doc, "a", "new")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + beginMarker("a") + "\nnew\n" + endMarker("a") + "\nprose\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if again, _ := replaceSection(got, "a", "new"); again != got {
		t.Errorf("not idempotent: %q", again)
	}
	for _, bad := range []string{"no markers", beginMarker("a") + " but no end", beginMarker("a") + endMarker("a") + beginMarker("a") + endMarker("a"),
		endMarker("a") + beginMarker("a")} {
		if _, err := replaceSection(bad, "a", "x"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestCellEscapes(t *testing.T) {
	if got := cell(`a|b *c* \(d` + "\ne"); got != `a\|b \*c\* \\(d e` {
		t.Errorf("cell: %q", got)
	}
	if got := codeCell("1.2|1.3"); got != "`1.2\\|1.3`" {
		t.Errorf("codeCell: %q", got)
	}
}
