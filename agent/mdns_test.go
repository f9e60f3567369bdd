package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/internal/mdns"
)

// TestResolveMDNS: IPA's three uses of mDNS, each answer's ipa_*
// parameters applied only where [mdns]allowed_overrides lets them.
func TestResolveMDNS(t *testing.T) {
	answers := map[string]mdns.Endpoint{
		"baremetal": {URL: "http://192.0.2.1:6385", Server: "baremetal._openstack._tcp.local.",
			Params: map[string]string{"ipa_ntp_server": "192.0.2.1", "ipa_debug": "True", "ipa_insecure": "1", "other": "x"}},
		"baremetal-introspection": {URL: "http://192.0.2.1:5050/", Server: "i.local."},
	}
	var asked []string
	found := func(_ context.Context, service string, opts mdns.Options) (mdns.Endpoint, error) {
		asked = append(asked, service)
		if opts.Attempts != 3 {
			t.Errorf("attempts %d, want [mdns]lookup_attempts' 3", opts.Attempts)
		}
		return answers[service], nil
	}
	none := func(context.Context, string, mdns.Options) (mdns.Endpoint, error) {
		return mdns.Endpoint{}, &mdns.NotFoundError{Service: "baremetal", Attempts: 3}
	}
	load := func(cmdline string) *config.Config {
		t.Helper()
		c, err := config.Load(config.Inputs{Cmdline: cmdline})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	c := load("ipa-api-url=mdns ipa-inspection-callback-url=mdns")
	if err := ResolveMDNS(t.Context(), c, nil, found); err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.APIURLs, ",") != "http://192.0.2.1:6385" || c.InspectionCallbackURL != "http://192.0.2.1:5050/v1/continue" {
		t.Errorf("api_url %v, callback %q", c.APIURLs, c.InspectionCallbackURL)
	}
	if c.NTPServer != "192.0.2.1" || c.Debug || c.Insecure {
		t.Errorf("overrides: ntp %q (allowed), debug %v and insecure %v (not allowed)", c.NTPServer, c.Debug, c.Insecure)
	}
	if strings.Join(asked, ",") != "baremetal,baremetal-introspection" {
		t.Errorf("asked for %v", asked)
	}

	c = load("ipa-api-url=mdns")
	if err := ResolveMDNS(t.Context(), c, nil, none); err == nil || !strings.Contains(err.Error(), "api_url=mdns (from kernel command line") {
		t.Errorf("explicit, no answer: %v", err)
	}
	var nf *mdns.NotFoundError
	c = load("ipa-inspection-callback-url=mdns")
	if err := ResolveMDNS(t.Context(), c, nil, none); !errors.As(err, &nf) {
		t.Errorf("callback, no answer: %v", err)
	}

	c = load("ipa-use-mdns=1")
	if err := ResolveMDNS(t.Context(), c, nil, none); err != nil || !c.Standalone {
		t.Errorf("implicit, no answer: the agent runs without lookup (standalone %v), err %v", c.Standalone, err)
	}
	c = load("ipa-use-mdns=1")
	asked = nil
	if err := ResolveMDNS(t.Context(), c, nil, found); err != nil || strings.Join(c.APIURLs, ",") != "http://192.0.2.1:6385" || c.Standalone {
		t.Errorf("implicit: %v %v %v", c.APIURLs, c.Standalone, err)
	}
	c = load("ipa-api-url=http://a:6385 ipa-use-mdns=1")
	asked = nil
	if err := ResolveMDNS(t.Context(), c, nil, found); err != nil || len(asked) != 0 {
		t.Errorf("a URL given: no lookup (asked %v, %v)", asked, err)
	}
}
