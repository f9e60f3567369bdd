package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/version"
)

func TestRunBadValues(t *testing.T) {
	dir := t.TempDir()
	cmdline := filepath.Join(dir, "cmdline")
	os.WriteFile(cmdline, []byte("BOOT_IMAGE=/vmlinuz ipa-api-url=http://127.0.0.1:1 ipa-lookup-timeout=soon\n"), 0o644)
	conf := filepath.Join(dir, "ipa.conf")
	os.WriteFile(conf, []byte("[DEFAULT]\nlisten_port = many\n"), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--kernel-cmdline", cmdline}, `bad value "soon" for lookup_timeout from kernel command line (ipa-lookup-timeout)`},
		{[]string{"run", "--kernel-cmdline", "", "--api-url", "http://x", "--config-file", conf}, `bad value "many" for listen_port from config file (` + conf + `:2 [DEFAULT] listen_port)`},
		{[]string{"run", "--kernel-cmdline", "", "--api-url", "http://x", "--allowed-devices", "sda"}, `bad value "sda" for allowed_devices from flag (--allowed-devices)`},
		{[]string{"run", "--kernel-cmdline", ""}, "no Ironic API URL"},
		{[]string{"run", "--kernel-cmdline", filepath.Join(dir, "missing")}, "kernel command line: open"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := runMain(context.Background(), c.args, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr.String(), c.want)
		}
		// Even a configuration error comes after the line that says which
		// agent it is.
		first, _, _ := strings.Cut(stderr.String(), "\n")
		if !strings.Contains(first, `msg=ironic-agent version=`+version.Version()+` build=`) || !strings.Contains(first, " commit=") || !strings.Contains(first, " kernel=") {
			t.Errorf("%v: first line %q does not say the version, build, commit and kernel", c.args, first)
		}
	}
	var stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"run", "--no-such-flag"}, &bytes.Buffer{}, &stderr); code != 2 {
		t.Errorf("unknown flag: exit %d", code)
	}
}

// TestRunLogFile: --log-file gets the same lines as the console, from the
// first; a log file that cannot be opened is said on the console and the
// agent goes on to its own error.
func TestRunLogFile(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "agent.log")
	var stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"run", "--kernel-cmdline", "", "--log-file", logFile}, &bytes.Buffer{}, &stderr); code != 1 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got, err := os.ReadFile(logFile)
	if err != nil || string(got) == "" || !strings.HasPrefix(stderr.String(), string(got)) {
		t.Errorf("the log file holds %q (%v); the console %q", got, err, stderr.String())
	}
	stderr.Reset()
	runMain(context.Background(), []string{"run", "--kernel-cmdline", "", "--log-file", filepath.Join(dir, "no", "agent.log")}, &bytes.Buffer{}, &stderr)
	if !strings.Contains(stderr.String(), "log file not written") || !strings.Contains(stderr.String(), "no Ironic API URL") {
		t.Errorf("a log file in a missing directory: %q", stderr.String())
	}
}

// A standalone agent serves the API and stops cleanly when its context
// ends (SIGTERM in main).
func TestRunStandaloneServesAndStops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- runMain(ctx, []string{"run", "--standalone", "--kernel-cmdline", "", "--listen-host", "127.0.0.1",
			"--listen-port", strconv.Itoa(port), "--steps-dir", t.TempDir(), "--state-dir", t.TempDir(), "--config-dir", t.TempDir()}, &bytes.Buffer{}, &stderr)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/v1/status")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("API never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after shutdown", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("agent did not stop")
	}
}
