package mdns

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
)

// publisher is Ironic's own: the conductor's _publish_endpoint calls
// ironic_lib's Zeroconf().register_service('baremetal', api_url, params)
// when [conductor]enable_mdns is on; [mdns]params adds to the TXT record.
const publisher = `
import sys
from oslo_config import cfg
from ironic_lib import mdns
cfg.CONF([], project='ironic')
cfg.CONF.set_override('params', {'ipa_ntp_server': '192.0.2.1'}, group='mdns')
zc = mdns.Zeroconf()
zc.register_service('baremetal', sys.argv[1], params={'ipa_debug': True})
print('registered', flush=True)
sys.stdin.read()
zc.close()
`

// pair makes two namespaces joined by a veth pair, 192.0.2.1/24 in the
// first (Ironic's side) and 192.0.2.2/24 in the second (the agent's),
// removed when t ends.
func pair(t *testing.T) (ironicNS, agentNS string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root (network namespaces)")
	}
	suffix := strings.ToLower(rand.Text()[:6])
	ironicNS, agentNS = "mdns-i-"+suffix, "mdns-a-"+suffix
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	for _, ns := range []string{ironicNS, agentNS} {
		run("netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		run("-n", ns, "link", "set", "lo", "up")
	}
	run("-n", ironicNS, "link", "add", "veth-i", "type", "veth", "peer", "name", "veth-a", "netns", agentNS)
	run("-n", ironicNS, "addr", "add", "192.0.2.1/24", "dev", "veth-i")
	run("-n", agentNS, "addr", "add", "192.0.2.2/24", "dev", "veth-a")
	run("-n", ironicNS, "link", "set", "veth-i", "up")
	run("-n", agentNS, "link", "set", "veth-a", "up")
	return ironicNS, agentNS
}

// publish runs Ironic's publisher for url in ns until t ends.
func publish(t *testing.T, ns, url string) {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import ironic_lib.mdns, zeroconf").Run(); err != nil {
		t.Skipf("SKIPPED: needs Ironic's ironic_lib and python3-zeroconf (Debian's python3-ironic-lib, in test.sh): %v", err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, py, "-c", publisher, url)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "registered" {
		t.Fatalf("Ironic's mDNS publisher: %q %v; stderr: %s", line, err, stderr.String())
	}
}

// TestLookupIronicsPublisher: the agent's side of a namespace finds the
// API that Ironic's own publisher announces in the other, as IPA's
// get_endpoint builds it, with the TXT record's parameters.
func TestLookupIronicsPublisher(t *testing.T) {
	ironicNS, agentNS := pair(t)
	publish(t, ironicNS, "http://192.0.2.1:6385")
	var ep Endpoint
	err := netnstest.Do(agentNS, func() (err error) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		ep, err = Lookup(ctx, "baremetal", Options{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("found %+v", ep)
	if ep.URL != "http://192.0.2.1:6385" {
		t.Errorf("URL %q, want http://192.0.2.1:6385", ep.URL)
	}
	if ep.Params["ipa_ntp_server"] != "192.0.2.1" || ep.Params["ipa_debug"] != "True" {
		t.Errorf("params %v, want ipa_ntp_server=192.0.2.1 and ipa_debug=True", ep.Params)
	}
	if _, ok := ep.Params["protocol"]; ok {
		t.Errorf("protocol is the URL's, not a parameter: %v", ep.Params)
	}
}

// TestLookupNoPublisher: nobody answers; the error names the service,
// the attempts and the interfaces asked.
func TestLookupNoPublisher(t *testing.T) {
	_, agentNS := pair(t)
	err := netnstest.Do(agentNS, func() error {
		_, err := Lookup(t.Context(), "baremetal", Options{Attempts: 2, Wait: 300 * time.Millisecond})
		return err
	})
	var nf *NotFoundError
	if !errors.As(err, &nf) || nf.Attempts != 2 || !strings.Contains(err.Error(), "veth-a") || !strings.Contains(err.Error(), "baremetal._openstack._tcp.local.") {
		t.Errorf("got %v", err)
	}
}
