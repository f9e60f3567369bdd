package ironic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMirrorFromOneLine(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "deb http://archive.example/debian bookworm main\n", "http://archive.example/debian"},
		{"security first", "deb http://sec.example/debian-security bookworm-security main\ndeb http://archive.example/debian bookworm main contrib\n", "http://archive.example/debian"},
		{"options", "deb [arch=amd64 signed-by=/k.gpg] https://archive.example/debian bookworm main\n", "https://archive.example/debian"},
		{"comment and deb-src", "# deb http://old.example/debian bookworm main\ndeb-src http://src.example/debian bookworm main\n", ""},
		{"updates only", "deb http://archive.example/debian bookworm-updates main\n", ""},
		{"unclosed options", "deb [arch=amd64 http://archive.example/debian bookworm main\n", ""},
		{"cdrom", "deb cdrom:[Debian]/ bookworm main\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := mirrorFromOneLine(strings.NewReader(c.in)); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestMirrorFromDeb822(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"bookworm default", `Types: deb
URIs: http://archive.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://sec.example/debian-security
Suites: bookworm-security
Components: main
`, "http://archive.example/debian"},
		{"security stanza first", "Types: deb\nURIs: http://sec.example/s\nSuites: bookworm-security\n\nTypes: deb deb-src\nURIs: http://archive.example/debian\nSuites: bookworm\n", "http://archive.example/debian"},
		{"disabled", "Enabled: no\nTypes: deb\nURIs: http://archive.example/debian\nSuites: bookworm\n", ""},
		{"src only", "Types: deb-src\nURIs: http://archive.example/debian\nSuites: bookworm\n", ""},
		{"folded uris", "Types: deb\nURIs:\n cdrom:/x\n http://archive.example/debian\nSuites: bookworm\n", "http://archive.example/debian"},
		{"flat repository", "Types: deb\nURIs: http://archive.example/flat\nSuites: ./\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := mirrorFromDeb822(strings.NewReader(c.in)); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestHostMirror(t *testing.T) {
	dir := t.TempDir()
	if _, err := HostMirror(dir); err == nil {
		t.Error("no sources: want an error")
	}
	if err := os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sources.list"), []byte("# moved to deb822\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sources.list.d", "debian.sources"), []byte("Types: deb\nURIs: http://archive.example/debian\nSuites: bookworm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := HostMirror(dir)
	if err != nil || got != "http://archive.example/debian" {
		t.Errorf("HostMirror = %q, %v", got, err)
	}
}

// FuzzAptSources: any sources file gives a URI with an archive scheme or
// nothing, never a panic.
func FuzzAptSources(f *testing.F) {
	f.Add("deb [trusted=yes] http://a.example/debian trixie main\n")
	f.Add("Types: deb\nURIs: http://a.example/debian\n  http://b.example/debian\nSuites: forky\n\n")
	f.Add("deb [ ]\n:\n \n")
	f.Fuzz(func(t *testing.T, in string) {
		for _, got := range []string{mirrorFromOneLine(strings.NewReader(in)), mirrorFromDeb822(strings.NewReader(in))} {
			if got != "" && !isArchiveURI(got) {
				t.Fatalf("mirror %q from %q", got, in)
			}
		}
	})
}

func TestParseSeries(t *testing.T) {
	for in, want := range map[string]Series{"": Series2023_1, "2023.1": Series2023_1, "2025.1": Series2025_1, " 2026.1 ": Series2026_1} {
		if got, err := ParseSeries(in); err != nil || got != want {
			t.Errorf("ParseSeries(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseSeries("zed"); err == nil || !strings.Contains(err.Error(), "2026.1") {
		t.Errorf("ParseSeries(zed): %v; want an error naming the known series", err)
	}
}

func TestIronicConfPerSeries(t *testing.T) {
	conf := func(s Series) string {
		c := Config{Dir: "/w", Series: s}
		c.defaults()
		return ironicConf(c, "/w")
	}
	old, mid, cur := conf(Series2023_1), conf(Series2025_1), conf(Series2026_1)
	for _, c := range []struct {
		name     string
		conf     string
		has, not []string
	}{
		{"2023.1", old, []string{"require_tls = false", "enabled_inspect_interfaces = no-inspect,fake,inspector", "endpoint_override = http://127.0.0.1:5050"}, []string{"[auto_discovery]", "fake,agent"}},
		{"2025.1", mid, []string{"enabled_inspect_interfaces = no-inspect,fake,agent,inspector", "endpoint_override = http://127.0.0.1:5050", "[auto_discovery]\nenabled = true"}, []string{"require_tls"}},
		{"2026.1", cur, []string{"enabled_inspect_interfaces = no-inspect,fake,agent\n", "[auto_discovery]\nenabled = true"}, []string{"require_tls", "inspector\n", "5050"}},
	} {
		for _, h := range c.has {
			if !strings.Contains(c.conf, h) {
				t.Errorf("%s: config lacks %q", c.name, h)
			}
		}
		for _, n := range c.not {
			if strings.Contains(c.conf, n) {
				t.Errorf("%s: config has %q", c.name, n)
			}
		}
	}
}

func TestHostPath(t *testing.T) {
	host := &Services{cfg: Config{Dir: "/tmp/w", Series: Series2023_1}}
	chroot := &Services{cfg: Config{Dir: "/tmp/w", Series: Series2026_1, RootFS: "/cache/r"}}
	for _, c := range []struct {
		s        *Services
		in, want string
	}{
		{host, "/tmp/w/state/certificates/x.crt", "/tmp/w/state/certificates/x.crt"},
		{chroot, chrootInner + "/state/certificates/x.crt", "/tmp/w/state/certificates/x.crt"},
		{chroot, "/var/lib/ironic/x", "/cache/r/var/lib/ironic/x"},
	} {
		if got := c.s.HostPath(c.in); got != c.want {
			t.Errorf("HostPath(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParentNodeFixKeepsThePython(t *testing.T) {
	// The fix must replace the whole statement head and stay valid Python:
	// same indentation for the if, a continuation for the walrus.
	if !strings.HasPrefix(parentNodeFix, "        if ") || !strings.HasSuffix(parentNodeFix, "):\n") {
		t.Errorf("fix %q does not keep the if statement's shape", parentNodeFix)
	}
	if !strings.Contains(parentNodeFix, "authorize_node_link_patch(") || !strings.Contains(parentNodeFix, "get_patch_values(patch, '/parent_node')") {
		t.Errorf("fix %q lost the authorisation or the guard", parentNodeFix)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "usr/lib/python3/dist-packages/ironic/api/controllers/v1")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	// A series without the bug (21.4's code) is left alone, no chroot needed.
	if err := os.WriteFile(filepath.Join(p, "node.py"), []byte("def patch():\n    pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fixParentNodePatch(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
}

// TestSeriesRootFSKeysUnchanged pins the series' cache keys: a change of
// Recipe that moved them would rebuild every cached Ironic root filesystem
// (minutes each) although nothing in them changed. A key moves here only
// with what its tree holds (2026.1: the network-boot loaders' packages).
func TestSeriesRootFSKeysUnchanged(t *testing.T) {
	for _, c := range []struct {
		series Series
		want   string
	}{
		{Series2025_1, "f23b2fc775119997"},
		{Series2026_1, "ef5c19fda7cf7508"},
	} {
		if got := c.series.recipe().key("http://archive.example/debian"); got != c.want {
			t.Errorf("%s: key %s, want %s (bump rootfsFormat on purpose instead)", c.series, got, c.want)
		}
	}
	rc := Series2026_1.recipe()
	rc.KeyExtra = "more"
	if rc.key("http://archive.example/debian") == "ef5c19fda7cf7508" {
		t.Error("KeyExtra does not change the key")
	}
}
