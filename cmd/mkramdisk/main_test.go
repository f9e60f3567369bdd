package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFlagErrors: bad flags are refused before anything is fetched or
// built, with a message naming the flag.
func TestFlagErrors(t *testing.T) {
	for args, want := range map[string]string{
		"-file etc/x":                       "want DST=SRC",
		"-file =/etc/hosts":                 "want DST=SRC",
		"-cached":                           "-cached needs -agent",
		"-cached -agent /bin/true -iso":     "cannot make an ISO",
		"-out /tmp/x stray":                 "unexpected arguments",
		"-cache-key a -cached -json":        "-cached needs -agent",
		"-kernel-package x -no-such-flag":   "no-such-flag",
		"-modules a -cached -file a=b -iso": "-cached needs -agent",
		"-arch x86":                         `unknown architecture "x86" (want one of amd64, arm64)`,
		"-budget -3":                        `want a whole number of MiB, 0 or more, got "-3"`,
		"-budget 48M":                       `want a whole number of MiB, 0 or more, got "48M"`,
	} {
		err := run(context.Background(), strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", args, err, want)
		}
	}
}

// TestBuildWithGoAndGitOnly builds the product ramdisk with `go run
// ./cmd/mkramdisk` and a PATH holding only go and git (links in a
// temporary directory): the build must fetch and unpack Debian's
// packages itself, without apt-get, dpkg-deb or xz, and stay within the
// size budget (mkramdisk fails otherwise). Downloads go to the shared
// cache.
func TestBuildWithGoAndGitOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: builds the whole ramdisk, downloading Debian's packages on first use")
	}
	bin := t.TempDir()
	for _, tool := range []string{"go", "git"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("SKIPPED: needs %s: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range []string{"apt-get", "dpkg-deb", "xz", "sh"} {
		if _, err := exec.LookPath(filepath.Join(bin, tool)); err == nil {
			t.Fatalf("%s is on the test's PATH", tool)
		}
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./cmd/mkramdisk", "-out", out)
	cmd.Path = filepath.Join(bin, "go")
	cmd.Dir = filepath.Join("..", "..")
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PATH=") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, "PATH="+bin)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mkramdisk with PATH=%s: %v\n%s", bin, err, b)
	}
	for _, f := range []string{"ironic-agent.kernel", "ironic-agent.initramfs"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "kernel") || strings.HasPrefix(line, "initramfs") {
			t.Log(line)
		}
	}
}
