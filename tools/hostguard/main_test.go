package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
)

// buildGuard builds the command as test.sh does.
func buildGuard(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hostguard")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// guard runs the command with the run's mark in its environment and
// returns its exit status and output.
func guard(t *testing.T, bin, mark string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HOSTGUARD_RUN="+mark)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return 0, string(out)
}

// tree is a machine root whose /etc the test may change; proc is the
// host's, read only, so the process check sees real processes.
func tree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range map[string]string{
		"etc/resolv.conf": "nameserver 192.0.2.53\n",
		"etc/hosts":       "127.0.0.1 localhost\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/proc", filepath.Join(root, "proc")); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestGuardFailsAMisbehavingRun runs snapshot, a step that rewrites
// resolv.conf and leaves a process running, snapshot and diff, the way
// test.sh runs the suite, and wants exit status 1 naming both.
func TestGuardFailsAMisbehavingRun(t *testing.T) {
	bin := buildGuard(t)
	root, dir := tree(t), t.TempDir()
	mark := fmt.Sprintf("test-%d", time.Now().UnixNano())
	before, after := filepath.Join(dir, "before.json"), filepath.Join(dir, "after.json")
	if code, out := guard(t, bin, mark, "snapshot", "-root", root, "-o", before); code != 0 {
		t.Fatalf("snapshot: exit %d\n%s", code, out)
	}

	step := exec.Command("sh", "-c", `echo '# written by ironic-agent init from the DHCP lease' >"$1/etc/resolv.conf"; sleep 60 >/dev/null 2>&1 & echo $!`, "sh", root)
	step.Env = append(os.Environ(), "HOSTGUARD_RUN="+mark)
	out, err := step.Output()
	if err != nil {
		t.Fatalf("misbehaving step: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("misbehaving step printed %q, not its child's pid", out)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	if code, out := guard(t, bin, mark, "snapshot", "-root", root, "-o", after); code != 0 {
		t.Fatalf("snapshot: exit %d\n%s", code, out)
	}
	code, report := guard(t, bin, mark, "diff", before, after)
	if code != 1 {
		t.Errorf("diff: exit %d, want 1\n%s", code, report)
	}
	for _, want := range []string{
		`CHANGED BY THE RUN: file /etc/resolv.conf: changed from "nameserver 192.0.2.53\n" to "# written by ironic-agent init from the DHCP lease\n"`,
		fmt.Sprintf(`CHANGED BY THE RUN: process %d sleep: appeared ("sleep 60")`, pid),
	} {
		if !strings.Contains(report, want) {
			t.Errorf("diff does not say %q:\n%s", want, report)
		}
	}
}

// TestGuardPassesACleanRun checks the other verdict: nothing changed,
// exit status 0. The network it records is a namespace of the test's own,
// so other tests' links on the machine cannot disturb it.
func TestGuardPassesACleanRun(t *testing.T) {
	netnstest.RequireRoot(t)
	bin := buildGuard(t)
	ns := netnstest.NewNetns(t, "hgcmd-"+netnstest.ID(t))
	root, dir := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"snapshot", "-root", root, "-netns", filepath.Join("/run/netns", ns.Name), "-o"}
	before, after := filepath.Join(dir, "before.json"), filepath.Join(dir, "after.json")
	for _, f := range []string{before, after} {
		if code, out := guard(t, bin, "clean", append(args, f)...); code != 0 {
			t.Fatalf("snapshot: exit %d\n%s", code, out)
		}
	}
	code, report := guard(t, bin, "clean", "diff", before, after)
	if code != 0 || !strings.Contains(report, "the host is as it was") {
		t.Errorf("diff of a clean run: exit %d\n%s", code, report)
	}
	if code, report := guard(t, bin, "clean", "diff", before, filepath.Join(dir, "missing.json")); code != 2 {
		t.Errorf("diff with a missing snapshot: exit %d, want 2\n%s", code, report)
	}
	var usage bytes.Buffer
	if code := run(t.Context(), nil, &usage, &usage); code != 2 || !strings.Contains(usage.String(), "usage") {
		t.Errorf("no arguments: exit %d\n%s", code, usage.String())
	}
}
