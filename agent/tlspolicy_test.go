package agent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/ironic-go/ironic-agent/agent/agenttls"
	"github.com/ironic-go/ironic-agent/agent/api"
	"github.com/ironic-go/ironic-agent/agent/config"
	"github.com/ironic-go/ironic-agent/agent/ironic"
)

// TestLookupTLSPolicy: the lookup's tls_min_version/tls_cipher_suites
// (Ironic 2026.x, IPA 12+) govern the API server's TLS and later outgoing
// connections; a value the agent cannot honour is ignored without failing
// the lookup; the automatic certificate uses tls_certificate_curve.
func TestLookupTLSPolicy(t *testing.T) {
	cfgPol, err := agenttls.ParsePolicy("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		config    map[string]any
		wantMin   uint16
		wantSuite []uint16
	}{
		{"no TLS keys", map[string]any{}, tls.VersionTLS12, cfgPol.CipherSuites},
		{"1.3 from Ironic", map[string]any{"tls_min_version": "1.3"}, tls.VersionTLS13, nil},
		{"suites from Ironic", map[string]any{"tls_cipher_suites": "ECDHE-ECDSA-AES256-GCM-SHA384"}, tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}},
		{"bad version ignored", map[string]any{"tls_min_version": "1.0"}, tls.VersionTLS12, cfgPol.CipherSuites},
		{"bad suite ignored", map[string]any{"tls_cipher_suites": "RC4-MD5"}, tls.VersionTLS12, cfgPol.CipherSuites},
		{"wrong type ignored", map[string]any{"tls_min_version": 1.3}, tls.VersionTLS12, cfgPol.CipherSuites},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{StateDir: t.TempDir(), TLSPolicy: cfgPol, TLSMinVersion: "1.2", TLSCipherSuites: "ECDHE-ECDSA-AES128-GCM-SHA256",
				TLSCertificateCurve: "p256", EnableAutoTLS: true, AdvertiseHost: "127.0.0.1", AdvertisePort: 9999}
			a := &Agent{tokens: &api.Tokens{}, log: slog.New(slog.DiscardHandler), cfg: cfg}
			tc.config["heartbeat_timeout"] = 300
			b, _ := json.Marshal(map[string]any{"node": map[string]any{"uuid": "0b7e2d5a-0000-4000-8000-000000000001"}, "config": tc.config})
			res, err := ironic.ParseLookup(b, "test")
			if err != nil {
				t.Fatal(err)
			}
			a.processLookup(res)
			c, err := a.TLSClientOptions(0).TLSConfig()
			if err != nil {
				t.Fatal(err)
			}
			srv, err := a.setupTLS(t.Context(), ironic.Version{Major: 1, Minor: ironic.VerifyCAMinor})
			if err != nil {
				t.Fatal(err)
			}
			for side, got := range map[string]*tls.Config{"client": c, "server": srv} {
				if got.MinVersion != tc.wantMin || got.MaxVersion != tls.VersionTLS13 || len(got.CipherSuites) != len(tc.wantSuite) {
					t.Errorf("%s: min %#x max %#x suites %v; want min %#x suites %v", side, got.MinVersion, got.MaxVersion, got.CipherSuites, tc.wantMin, tc.wantSuite)
				}
				for i := range tc.wantSuite {
					if i < len(got.CipherSuites) && got.CipherSuites[i] != tc.wantSuite[i] {
						t.Errorf("%s: suites %v, want %v", side, got.CipherSuites, tc.wantSuite)
					}
				}
			}
			if k, ok := srv.Certificates[0].PrivateKey.(*ecdsa.PrivateKey); !ok || k.Curve != elliptic.P256() {
				t.Errorf("certificate key %T, want P-256 from tls_certificate_curve", srv.Certificates[0].PrivateKey)
			}
		})
	}
}
