package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/agent"
)

// TestFIPSFromKernelCommandLine: fips=1 restarts the agent in Go's FIPS
// 140-3 mode, which it says; there a non-approved TLS suite is refused,
// naming FIPS mode as the reason.
func TestFIPSFromKernelCommandLine(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: builds the agent")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ironic-agent")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	cmdline := func(s string) string {
		p := filepath.Join(t.TempDir(), "cmdline")
		if err := os.WriteFile(p, []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	args := []string{"run", "--standalone", "--listen-host", "127.0.0.1", "--listen-port", strconv.Itoa(port),
		"--steps-dir", t.TempDir(), "--state-dir", t.TempDir(), "--config-dir", t.TempDir()}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--kernel-cmdline", cmdline("quiet fips=1"))...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	var seen []string
	found := false
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.Contains(sc.Text(), agent.EventFIPSMode) {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("the agent never said it runs in FIPS mode:\n%s", strings.Join(seen, "\n"))
	}

	out, err := exec.CommandContext(ctx, bin, append(args, "--kernel-cmdline", cmdline("fips=1 ipa-tls-cipher-suites=ECDHE-RSA-CHACHA20-POLY1305"))...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not approved in FIPS mode") {
		t.Errorf("a ChaCha20 suite in FIPS mode: %v: %s", err, out)
	}
}
