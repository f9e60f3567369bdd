package agent

import (
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/api"
	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/agent/ironic"
)

// An IPv6-only provisioning network: ipa-api-url with a bracketed IPv6
// literal, as Metal3 passes it. The advertised address is the source of
// the route to Ironic (here the loopback, the only IPv6 route a test may
// count on), the callback URL brackets it, and the automatic TLS
// certificate carries it as its IP SAN.
func TestAdvertiseIPv6(t *testing.T) {
	if l, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		t.Skipf("SKIPPED: no IPv6 loopback here: %v", err)
	} else {
		l.Close()
	}
	cfg, err := config.Load(config.Inputs{Cmdline: "ipa-api-url=http://[::1]:6385 ipa-advertise-port=9999"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.APIURLs) != 1 || cfg.APIURLs[0] != "http://[::1]:6385" {
		t.Fatalf("api_url %q", cfg.APIURLs)
	}
	if h, err := routeSource(t.Context(), cfg.APIURLs[0]); err != nil || h != "::1" {
		t.Fatalf("route source %q, %v; want ::1", h, err)
	}
	cfg.StateDir = t.TempDir()
	cfg.EnableAutoTLS = true
	a := &Agent{tokens: &api.Tokens{}, log: slog.New(slog.DiscardHandler), cfg: cfg}
	srv, err := a.setupTLS(t.Context(), ironic.Version{Major: 1, Minor: ironic.VerifyCAMinor})
	if err != nil {
		t.Fatal(err)
	}
	if a.callbackURL != "https://[::1]:9999" {
		t.Errorf("callback URL %q, want https://[::1]:9999", a.callbackURL)
	}
	block, _ := pem.Decode([]byte(a.verifyCA))
	if block == nil {
		t.Fatalf("no certificate PEM for Ironic: %q", a.verifyCA)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.IPAddresses) != 1 || !c.IPAddresses[0].Equal(net.IPv6loopback) {
		t.Errorf("certificate SAN %v, want [::1]", c.IPAddresses)
	}
	if srv == nil || len(srv.Certificates) != 1 {
		t.Errorf("server TLS config %v", srv)
	}
}
