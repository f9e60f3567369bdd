package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
)

// TestIronicTLS runs an Ironic of its own (on free ports) serving its API
// over HTTPS with a CA made for the test, and shows how the agent trusts it:
//   - cafile: through [DEFAULT]cafile in a conf file of a config directory,
//     as Metal3's ramdisk drops one in /etc/ironic-python-agent.d/; lookup,
//     heartbeats and a manual clean step all go over https;
//   - insecure: through ipa-insecure=1 on the kernel command line, no CA;
//   - fips: with the CA file and fips=1, Ironic's own TLS endpoint
//     negotiates an approved suite with the agent in FIPS mode;
//   - wrong-ca: a CA that did not sign Ironic's certificate fails lookup,
//     and the agent exits naming the URL, the certificate problem and the
//     CA file it verified against.
//
// Ironic's calls to the agent stay as the series has them (plain http on
// 2023.1, auto-TLS where Ironic requires it). One Ironic serves the three
// cases: starting one costs seconds.
func TestIronicTLS(t *testing.T) {
	s := need(t)
	svc := ironic.StartForTest(t, t.Context(), s.config(ironic.Config{NoInspector: true, TLS: true}))
	if !strings.HasPrefix(svc.IronicURL, "https://") {
		t.Fatalf("Ironic's URL is %s, want https", svc.IronicURL)
	}
	t.Logf("Ironic over https up in %s (dbsync %s)", svc.Timings.Ironic.Round(time.Millisecond), svc.Timings.DBSync.Round(time.Millisecond))
	c := svc.Ironic

	t.Run("cafile", func(t *testing.T) {
		start := time.Now()
		confDir := confDirWith(t, "[DEFAULT]\ncafile = "+svc.TLS.CA+"\n")
		cleanOverTLS(t, s, c, svc.IronicURL, "52:54:e2:71:00:01", "--config-dir", confDir)
		t.Logf("lookup, heartbeats and a clean step over https with the CA file: %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("insecure", func(t *testing.T) {
		start := time.Now()
		cmdline := filepath.Join(t.TempDir(), "cmdline")
		if err := os.WriteFile(cmdline, []byte("ipa-insecure=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cleanOverTLS(t, s, c, svc.IronicURL, "52:54:e2:71:00:02", "--config-dir", confDirWith(t, ""), "--kernel-cmdline", cmdline)
		t.Logf("lookup, heartbeats and a clean step over https with ipa-insecure=1: %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("fips", func(t *testing.T) {
		confDir := confDirWith(t, "[DEFAULT]\ncafile = "+svc.TLS.CA+"\n")
		a := cleanOverTLS(t, s, c, svc.IronicURL, "52:54:e2:71:00:04", append([]string{"--config-dir", confDir}, fipsCmdline(t, "")...)...)
		checkIronicTLSFIPS(t, a)
	})

	t.Run("wrong-ca", func(t *testing.T) {
		start := time.Now()
		other, err := ironic.WriteTLS(t.TempDir(), "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		confDir := confDirWith(t, "[DEFAULT]\ncafile = "+other.CA+"\n")
		a := s.startAgent(t, agentOpts{MAC: "52:54:e2:71:00:03", APIURL: svc.IronicURL,
			Extra: []string{"--config-dir", confDir, "--lookup-timeout", "5"}})
		select {
		case <-a.done:
		case <-time.After(90 * time.Second):
			t.Fatal("the agent did not give up its lookup within 90 s")
		}
		if a.err == nil {
			t.Fatal("the agent exited 0 after a failed lookup")
		}
		log := a.Log()
		for _, want := range []string{svc.IronicURL + "/", "certificate signed by unknown authority", "verified against the CA file " + other.CA} {
			if !strings.Contains(log, want) {
				t.Errorf("agent log lacks %q", want)
			}
		}
		t.Logf("agent exit: %v; its last lines:\n%s", a.err, tailBytes([]byte(log), 1200))
		t.Logf("wrong CA refused in %s", time.Since(start).Round(time.Millisecond))
	})
}

// confDirWith makes a config directory holding one conf file with body.
func confDirWith(t *testing.T, body string) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "ironic-python-agent.d")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "ironic-ca.conf"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// cleanOverTLS enrolls a node on c, starts manual cleaning with one
// executable clean step and runs an agent (with extra flags) against
// ironicURL until the node is manageable again with the step run; it
// returns that agent.
func cleanOverTLS(t *testing.T, s *suite, c *ironic.Client, ironicURL, mac string, extra ...string) *agentProc {
	t.Helper()
	ctx := t.Context()
	steps := filepath.Join(t.TempDir(), "steps.d")
	marker := filepath.Join(t.TempDir(), "ran")
	writeStep(t, steps, "e2e_tls_step", "cat >/dev/null; touch "+marker)
	n := ironic.Enroll(t, t.Context(), c, ironic.NodeSpec{Name: "e2e-tls-" + strings.ReplaceAll(mac[12:], ":", "")}, mac)
	d := s.driver(t, c, n.UUID, agentOpts{MAC: mac, StepsDir: steps, APIURL: ironicURL, Extra: extra})
	a, _ := d.Start(nodes.ProvisionStateOpts{Target: nodes.TargetClean, CleanSteps: []nodes.CleanStep{{Interface: nodes.InterfaceDeploy, Step: "e2e_tls_step"}}})
	if err := a.WaitLog(ctx, "lookup succeeded", stepTimeout); err != nil {
		t.Fatal(err)
	}
	d.Wait("manageable", stepTimeout)
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the clean step did not run: %v", err)
	}
	return a
}
