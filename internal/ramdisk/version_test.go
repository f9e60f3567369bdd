package ramdisk

import (
	"context"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/version"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// The stamp follows the tree: a tag, a dirty tree, a commit after the tag.
func TestVersionLDFlags(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("1"), 0o644)
	git(t, dir, "add", "f")
	git(t, dir, "commit", "-qm", "one")
	git(t, dir, "tag", "v1.2.3")
	first := git(t, dir, "rev-parse", "HEAD")
	ctx := context.Background()
	check := func(wantDescribe, wantCommit string) {
		t.Helper()
		got, err := VersionLDFlags(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		want := "-X " + version.DescribeVar + "=" + wantDescribe + " -X " + version.CommitVar + "=" + wantCommit
		if !regexp.MustCompile("^" + want + "$").MatchString(got) {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	check("v1.2.3", first)
	os.WriteFile(file, []byte("2"), 0o644)
	check("v1.2.3-dirty", first)
	git(t, dir, "commit", "-qam", "two")
	check("v1.2.3-1-g[0-9a-f]+", git(t, dir, "rev-parse", "HEAD"))
	if _, err := VersionLDFlags(ctx, t.TempDir()); err == nil {
		t.Error("no error outside a git tree")
	}
}

// The agent the ramdisk build links says which commit it is, although
// this environment builds with -buildvcs=false, and still sends Ironic a
// plain version; it carries the certified FIPS module (checkFIPSModule).
func TestBuildAgentStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("links the agent")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skipf("%s is not a git tree", root)
	}
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "ironic-agent")
	if err := BuildAgent(ctx, root, bin); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	commit := git(t, root, "rev-parse", "HEAD")
	v := regexp.QuoteMeta(version.Version())
	want := regexp.MustCompile(`^ironic-agent ` + v + ` \(build ` + v + `(\+g` + commit[:12] + `(\.dirty)?)?` +
		`, commit ` + commit + `, go[^,]+, linux/[a-z0-9]+\)\n$`)
	if !want.Match(out) {
		t.Errorf("version printed %q, want %s", out, want)
	}
	checkFIPSModule(t, bin)
}

// checkFIPSModule checks that the agent at bin links the Go Cryptographic
// Module v1.0.0 (GOFIPS140=certified), with FIPS mode off unless asked
// for, and that in FIPS mode the module's start-up integrity check and
// self-tests pass in the stripped binary.
func checkFIPSModule(t *testing.T, bin string) {
	t.Helper()
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if v := settings["GOFIPS140"]; !strings.HasPrefix(v, "v1.0.0") {
		t.Errorf("the agent's GOFIPS140 is %q, want the certified module v1.0.0", v)
	}
	if d := settings["DefaultGODEBUG"]; !slices.Contains(strings.Split(d, ","), "fips140=off") {
		t.Errorf("the agent's DefaultGODEBUG is %q, want fips140=off (fips=1 turns it on)", d)
	}
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=on")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the agent in FIPS mode: %v: %s", err, out)
	}
}
