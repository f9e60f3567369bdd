package agent

import (
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/internal/testbed/fakeironic"
)

// BenchmarkStartupToAPIReady measures what IPA's 1.15 s compares with: from
// building the agent to its API listening, through the real inventory of
// this machine, version discovery, lookup and the automatic TLS certificate
// (a fake Ironic on loopback answers with the recorded 21.4 replies). It
// also reports the process's resident memory afterwards.
func BenchmarkStartupToAPIReady(b *testing.B) {
	// Each agent gets the token: no masking.
	srv := httptest.NewServer(&fakeironic.Server{NodeUUID: recordedNode, Token: recordedToken, HeartbeatTimeout: 2})
	defer srv.Close()
	for b.Loop() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		cfg, err := config.Load(config.Inputs{Flags: map[string]string{
			"api_url": srv.URL, "advertise_host": "127.0.0.1",
			"advertise_port": strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "steps_dir": b.TempDir(), "state_dir": b.TempDir()}})
		if err != nil {
			b.Fatal(err)
		}
		ready := make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		a, err := New(ctx, Options{Config: cfg, Log: slog.New(slog.DiscardHandler), StateRoot: b.TempDir(),
			SkipRAIDAssembly: true, DisableMultipath: true,
			Hooks: Hooks{Listener: ln, Machine: &fakeMachine{}, Ready: func(string) { close(ready) }}})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		select {
		case <-ready:
		case err := <-done:
			b.Fatalf("agent stopped: %v", err)
		}
		b.StopTimer()
		cancel()
		<-done
		b.StartTimer()
	}
	b.StopTimer()
	if rss := vmRSSKiB(); rss > 0 {
		b.ReportMetric(float64(rss)/1024, "RSS-MiB")
	}
}

// vmRSSKiB reads VmRSS of this process.
func vmRSSKiB() int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	return 0
}
