// Package e2e runs the agent binary against Debian's real Ironic on
// 127.0.0.1 (the series $IRONIC_SERIES picks: 2023.1, the host's Ironic 21.4
// and ironic-inspector 11.1, by default; 2025.1 or 2026.1 from a cached
// Debian root filesystem), with loop devices as the only disks it may touch.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

// suite is what TestMain sets up once for the whole test binary: starting
// Ironic takes seconds, so every scenario shares one.
type suite struct {
	dir       string
	services  *ironic.Services
	ironic    *ironic.Client
	inspector *ironic.InspectorClient
	agentBin  string
	// fixtureRoot is the recorded machine tree every agent reads (with its
	// own MAC patched in).
	fixtureRoot string
	portMu      sync.Mutex
	nextPort    int
	// setupErr is why the suite could not be set up; tests fail with it.
	setupErr error
	// series is the Ironic release under test, installed as installed.
	series    ironic.Series
	installed *ironic.Installed
	// installTime is how long apt-get or the root filesystem's build took
	// (0: packages were present, or the root filesystem was cached).
	installTime time.Duration
	buildTime   time.Duration
}

// theSuite is written once by TestMain before any test runs.
var theSuite *suite

// TestMain runs the tests in a private mount namespace (looptest.Main):
// what they mount, and the loop devices those mounts hold, go with the
// test binary however it ends.
func TestMain(m *testing.M) {
	looptest.Main(func() int { return runMain(m) })
}

func runMain(m *testing.M) int {
	if os.Geteuid() != 0 {
		// Tests skip loudly on their own.
		return m.Run()
	}
	s := &suite{}
	theSuite = s
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "ironic-e2e-")
	if err != nil {
		s.setupErr = err
		return m.Run()
	}
	s.dir = dir
	defer func() {
		if os.Getenv("E2E_KEEP") == "" {
			os.RemoveAll(dir)
		}
	}()
	s.setupErr = s.setUp(ctx)
	if s.services != nil {
		defer s.services.Close()
	}
	fmt.Fprintf(os.Stderr, "e2e: Ironic series %s; work dir %s; install %s, agent build %s, dbsync %s, ironic start %s, inspector start %s\n",
		s.series, dir, s.installTime.Round(time.Millisecond), s.buildTime.Round(time.Millisecond), timing(s, "dbsync"), timing(s, "ironic"), timing(s, "inspector"))
	if s.setupErr != nil {
		fmt.Fprintf(os.Stderr, "e2e: set-up failed: %v\n", s.setupErr)
	}
	return m.Run()
}

func timing(s *suite, what string) time.Duration {
	if s.services == nil {
		return 0
	}
	t := s.services.Timings
	switch what {
	case "dbsync":
		return t.DBSync.Round(time.Millisecond)
	case "ironic":
		return t.Ironic.Round(time.Millisecond)
	default:
		return t.Inspector.Round(time.Millisecond)
	}
}

// seriesIndependent skips t when the suite runs against a series other
// than the default (./test.sh's second round, IRONIC_SERIES_EXTRA), unless
// $E2E_VM_SLOW is 1: for tests of the agent's own side, which every series
// drives alike (docs/testing.md: Ironic series).
func (s *suite) seriesIndependent(t *testing.T) {
	t.Helper()
	if os.Getenv("E2E_VM_SLOW") == "1" {
		return
	}
	if def, _ := ironic.ParseSeries(""); s.series != def {
		t.Skipf("SKIPPED: series-independent test: runs in the default series' round (%s) only; E2E_VM_SLOW=1 runs it with %s=%s too (docs/testing.md: Ironic series)",
			def, ironic.SeriesEnv, string(s.series))
	}
}

func (s *suite) setUp(ctx context.Context) error {
	var err error
	if s.series, err = ironic.SeriesFromEnv(); err != nil {
		return err
	}
	if s.installed, err = ironic.Install(ctx, s.series); err != nil {
		return err
	}
	s.installTime = s.installed.Took
	if s.fixtureRoot, err = filepath.Abs("../fixtures/ci-firecracker/root"); err != nil {
		return err
	}
	start := time.Now()
	s.agentBin = filepath.Join(s.dir, "ironic-agent")
	if bin := os.Getenv("E2E_AGENT_BIN"); bin != "" {
		// A prebuilt binary, for trying another branch's agent.
		s.agentBin = bin
	} else {
		args := []string{"build", "-o", s.agentBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		build := exec.CommandContext(ctx, "go", append(args, "../cmd/ironic-agent")...)
		// The cryptographic module the product links (docs/fips.md).
		build.Env = append(os.Environ(), "GOFIPS140="+ramdisk.FIPSModule)
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s ../cmd/ironic-agent: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	s.buildTime = time.Since(start)
	st, err := ironic.StartStack(ctx, s.config(ironic.Config{Dir: filepath.Join(s.dir, "services")}))
	if err != nil {
		return err
	}
	s.services, s.ironic, s.inspector = st.Services, st.Ironic, st.Inspector
	return nil
}

// config fills in the series (and its root filesystem) of c.
func (s *suite) config(c ironic.Config) ironic.Config { return s.installed.Config(c) }

// needInspector ends a test that drives ironic-inspector when the series
// has none (2026.1: retired upstream, Ironic inspects by itself).
func (s *suite) needInspector(t *testing.T) {
	t.Helper()
	if !s.series.HasInspector() {
		t.Skipf("SKIPPED: Ironic series %s has no ironic-inspector (retired upstream); built-in inspection is tested instead", s.series)
	}
}

// need returns the suite or ends the test: skipped when not root (the only
// reason to skip), failed when set-up failed. On failure the services' logs
// written during the test are attached.
func need(t *testing.T) *suite {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: installs and runs Debian's Ironic and ironic-inspector, uses loop devices")
	}
	s := theSuite
	if s == nil || s.setupErr != nil {
		var err error
		if s != nil {
			err = s.setupErr
		}
		t.Fatalf("e2e set-up failed: %v", err)
	}
	mark := s.services.Mark()
	start := time.Now()
	t.Cleanup(func() {
		t.Logf("scenario time: %s", time.Since(start).Round(time.Millisecond))
		if t.Failed() {
			t.Logf("service logs written during the test:\n%s", mark.Since(64<<10))
		}
	})
	return s
}
